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
whatever that load finds. The commands plugins add to a kernel group (``plugins new``, from the
built-in ``scaffold``) are found the same way, by :class:`WithPluginSubcommands`.
"""

from __future__ import annotations

import click

from ._command_index import (
    CommandEntry,
    asked_of,
    entries_of,
    index_key,
    raw_plugins_section,
    read_index,
    spelled,
    write_index,
)
from ._common import load_config_or_defaults, load_host

__all__ = ["WithPluginSubcommands", "command_index", "index_state", "load_plugin_command"]


def command_index(group: str | None = None) -> dict[str, CommandEntry]:
    """Plugin commands by name (a disabled plugin's too, marked), without importing third-party
    plugins: from the index when it is current; else the built-ins' (imported: they ship with the
    kernel) and what the index last knew of the third-party plugins still installed. The top-level
    ones, or those plugins add to the kernel group ``group``."""
    return {e.name: e for e in index_state()[0].values() if e.group == group}


def index_state() -> tuple[dict[str, CommandEntry], list[str]]:
    """Every indexed command, keyed as typed (``eval``, ``plugins new``), and the enabled
    plugins whose commands the index does not know: third-party plugins installed since a
    command last loaded the plugins (``--help`` names them instead of importing them)."""
    digest, names = index_key()
    data = read_index()
    entries = {spelled(e["name"], e.get("group")): CommandEntry(**e)
               for e in data.get("commands", [])}
    asked = asked_of(data)
    if data.get("key") != digest:
        entries, asked = _rebuilt(digest, names, entries, asked)
    return entries, sorted(name for name, blocked in names if not blocked and name not in asked)


def _rebuilt(digest: str, names: list[tuple[str, bool]], entries: dict[str, CommandEntry],
             asked: set[str]) -> tuple[dict[str, CommandEntry], set[str]]:
    """The index under the current key: the built-ins asked again (imported: they ship with the
    kernel), and what the index knew of the third-party plugins still installed."""
    from ..host import PluginHost
    from ..loader import BUILTIN_PLUGINS

    present = dict(names)
    config, _error = load_config_or_defaults()
    builtins = PluginHost.load(config=config, entry_points=False, directories=False)
    out = entries_of(builtins)
    for key, entry in entries.items():
        if entry.plugin in BUILTIN_PLUGINS and not present.get(entry.plugin, False):
            continue  # the built-ins were just asked
        if entry.plugin in present and key not in out:
            out[key] = CommandEntry(entry.name, entry.plugin, entry.help,
                                    not present[entry.plugin], entry.group)
    # a third-party plugin installed since stays unasked (and named by --help) until a command
    # loads the plugins
    known = sorted((asked & set(present)) | set(BUILTIN_PLUGINS) | set(builtins.records))
    write_index(digest, out, known)
    return out, set(known)


class WithPluginSubcommands(click.Group):
    """A kernel group holding its own sub-commands and those plugins add to it
    (``register(command, group=NAME)``): listed from the index, built as a top-level plugin
    command is (:func:`load_plugin_command`)."""

    def _index(self, ctx: click.Context) -> dict[str, CommandEntry]:
        key = f"hermes_core.command_index.{self.name}"
        index: dict[str, CommandEntry] | None = ctx.meta.get(key)
        if index is None:
            index = ctx.meta[key] = command_index(self.name)
        return index

    def list_commands(self, ctx: click.Context) -> list[str]:
        plugin = [name for name, entry in self._index(ctx).items() if entry.enabled]
        return sorted({*self.commands, *plugin})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        return load_plugin_command(cmd_name, str(self.name))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own layout, with the plugins' sub-commands described from the index: the
        # group's --help imports no plugin.
        index = self._index(ctx)
        commands: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is None:
                command = click.Command(name, help=index[name].help)
            if not command.hidden:
                commands.append((name, command))
        if commands:
            limit = formatter.width - 6 - max(len(name) for name, _ in commands)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit))
                                    for name, command in commands])


def load_plugin_command(name: str, group: str | None = None) -> click.Command | None:
    """The plugin command ``name`` (a sub-command of the kernel group ``group``, if given); a
    command that explains when its plugin is disabled; or None."""
    digest, names = index_key()
    blocked = {plugin for plugin, is_blocked in names if is_blocked}
    data = read_index()
    typed = spelled(name, group)
    known = {spelled(e["name"], e.get("group")): e.get("plugin") for e in data.get("commands", [])}
    if known.get(typed) in blocked:
        return _disabled(name, typed, str(known[typed]))
    plugin = known.get(typed)
    if data.get("key") == digest and isinstance(plugin, str):
        builtin = _builtin_command(name, plugin, group)
        if builtin is not None:
            return builtin
    host = load_host(tolerate_bad_config=True, warn_config=False)
    table = host.commands if group is None else host.subcommands.get(group, {})
    found = table.get(name)
    if found is not None:
        command: click.Command = found[0]
        return command
    disabled = sorted(r.name for r in host.records.values() if not r.enabled)
    if disabled and group is None:  # never imported, so what they offer is unknown: say so
        return _unknown(name, disabled)  # instead of "no such" (a group's unknown name: click's)
    return None


def _builtin_command(name: str, plugin: str, group: str | None = None) -> click.Command | None:
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

    found = (commands_of(plugin, obj, group) or {}).get(name)
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


def _disabled(name: str, typed: str, plugin: str) -> click.Command:
    @click.command(name, context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True},
                   help=f"(disabled) provided by the plugin {plugin!r}.", add_help_option=False)
    def stub() -> None:
        raise click.ClickException(
            f"the command {typed!r} is provided by the plugin {plugin!r}, which is disabled; "
            f"enable it with 'hermes-core plugins enable {plugin}'")

    return stub
