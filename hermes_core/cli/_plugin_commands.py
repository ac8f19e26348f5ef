"""Plugin commands on the command line: the names ``--help`` lists, and the command itself.

``--help`` reads the index (:mod:`._command_index`) and imports no third-party plugin. Invoking a
plugin command trusts the index for two things only: the name of the plugin to blame when it is
disabled, and, while the index is current (its key still matches the kernel, every installed
plugin and the blocked names), which *built-in* plugin provides the command. That command is then
asked of the built-in alone (:func:`hermes_core._command_table.commands_of`: no host, no config
models, no other plugin imported); built-ins ship with the kernel and load first, so no other
plugin can take their command names, and the command loads every plugin itself when it runs.
Every other case (a third-party plugin's command, a stale or missing index, a ``plugins`` section
of config.yaml that cannot be read as written, a plugin left out by ``plugins.enabled_only``, a
built-in that fails to import or register) loads every plugin to find the command, and reports
whatever that load finds.
"""

from __future__ import annotations

import click

from ._command_index import (
    CommandEntry,
    index_key,
    raw_plugins_section,
    read_index,
    short_help,
    write_index,
)
from ._common import load_config_or_defaults, load_host

__all__ = ["command_index", "load_plugin_command"]


def command_index() -> dict[str, CommandEntry]:
    """Plugin commands by name (a disabled plugin's too, marked), without importing third-party
    plugins: from the index when it is current; else the built-ins' (imported: they ship with the
    kernel) and what the index last knew of the third-party plugins still installed."""
    digest, names = index_key()
    data = read_index()
    entries = {e["name"]: CommandEntry(**e) for e in data.get("commands", [])}
    if data.get("key") == digest:
        return entries
    from ..host import PluginHost
    from ..loader import BUILTIN_PLUGINS

    present = {name: blocked for name, blocked in names}
    config, _error = load_config_or_defaults()
    builtins = PluginHost.load(config=config, entry_points=False, directories=False)
    out = {name: CommandEntry(name, plugin, short_help(command), True)
           for name, (command, plugin) in builtins.commands.items()}
    for name, entry in entries.items():
        if entry.plugin in BUILTIN_PLUGINS and not present.get(entry.plugin, False):
            continue  # the built-ins were just asked
        if entry.plugin in present and name not in out:
            out[name] = CommandEntry(name, entry.plugin, entry.help, not present[entry.plugin])
    # Written with the current key: a third-party plugin installed since the index was last
    # complete shows its commands in --help once any command has loaded the plugins.
    write_index(digest, out)
    return out


def load_plugin_command(name: str) -> click.Command | None:
    """The plugin command ``name``; a command that explains when its plugin is disabled; or None."""
    digest, names = index_key()
    blocked = {plugin for plugin, is_blocked in names if is_blocked}
    data = read_index()
    known = {e["name"]: e.get("plugin") for e in data.get("commands", [])}
    if known.get(name) in blocked:
        return _disabled(name, str(known[name]))
    plugin = known.get(name)
    if data.get("key") == digest and isinstance(plugin, str):
        builtin = _builtin_command(name, plugin)
        if builtin is not None:
            return builtin
    host = load_host(tolerate_bad_config=True, warn_config=False)
    found = host.commands.get(name)
    if found is not None:
        command: click.Command = found[0]
        return command
    disabled = sorted(r.name for r in host.records.values() if not r.enabled)
    if disabled:  # never imported, so what they offer is unknown: say so instead of "no such"
        return _unknown(name, disabled)
    return None


def _builtin_command(name: str, plugin: str) -> click.Command | None:
    """``name`` as the built-in ``plugin`` registers it, asked alone (no host, no config models);
    None when that cannot be sure: not a built-in, config.yaml unreadable or its ``plugins``
    section malformed, the plugin not allowed, or it fails to import or register."""
    from ..loader import (
        BUILTIN_PLUGINS,
        Candidate,
        ImportFailure,
        allowed_names,
        blocked_names,
        import_candidate,
        is_blocked,
    )

    module = BUILTIN_PLUGINS.get(plugin)
    settings = None if module is None else raw_plugins_section()
    if module is None or settings is None:
        return None
    disabled, enabled_only = settings.get("disabled") or [], settings.get("enabled_only")
    if not _names(disabled) or (enabled_only is not None and not _names(enabled_only)):
        return None
    candidate = Candidate(name=plugin, source="builtin", module=module)
    if is_blocked(candidate, blocked_names(disabled), allowed_names(enabled_only)):
        return None
    try:
        obj = import_candidate(candidate)
    except ImportFailure:
        return None
    from .._command_table import commands_of

    found = (commands_of(plugin, obj) or {}).get(name)
    return None if found is None else _as_command(found[0])


def _names(value: object) -> bool:
    """Whether a ``plugins`` list as written is one the config would accept: a list of names."""
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _as_command(obj: object) -> click.Command:
    assert isinstance(obj, click.Command)
    return obj


def _unknown(name: str, disabled: list[str]) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True}, add_help_option=False)
    def stub() -> None:
        raise click.ClickException(
            f"no command {name!r}: it is neither the kernel's nor an enabled plugin's. These "
            f"plugins are disabled and may provide it: {', '.join(disabled)} (enable one with "
            "'hermes-core plugins enable NAME'); see 'hermes-core --help'")

    return stub


def _disabled(name: str, plugin: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True},
                   help=f"(disabled) provided by the plugin {plugin!r}.", add_help_option=False)
    def stub() -> None:
        raise click.ClickException(
            f"the command {name!r} is provided by the plugin {plugin!r}, which is disabled; "
            f"enable it with 'hermes-core plugins enable {plugin}'")

    return stub
