"""Plugin commands on the command line, with an index so ``--help`` imports no plugin.

Knowing a plugin's commands means importing it. ``hermes-core --help`` must stay fast with many
plugins installed, so the names and one-line helps are kept in ``$HERMES_CORE_HOME/cache/
commands.json``, keyed by what decides them: the kernel's version, every plugin candidate (name,
source, distribution and version, a directory plugin's modification time) and the blocked names.
When the key changes, the index is rebuilt once by loading the plugins. Invoking a plugin command
always loads the plugins (the command needs them anyway) and never trusts the index for more than
the name of the plugin to blame when it is disabled.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["CommandEntry", "command_index", "load_plugin_command", "remember_commands"]

log = logging.getLogger("hermes_core.cli")


@dataclass(frozen=True, slots=True)
class CommandEntry:
    name: str
    plugin: str
    help: str
    enabled: bool


def _key() -> tuple[str, list[Any]]:
    """What decides the plugin commands, as a digest, and the candidates' names."""
    from .._version import __version__
    from ..loader import blocked_names, discover, is_blocked
    from ..paths import home_dir, plugins_dir

    blocked = blocked_names(_disabled_in_config())
    parts: list[Any] = [__version__, str(Path(__file__).resolve().parents[1])]
    names: list[Any] = []
    for candidate in discover(plugins_dir(home_dir())):
        stamp = None
        if candidate.path is not None:
            try:
                stamp = max(p.stat().st_mtime_ns for p in Path(candidate.path).glob("*.py"))
            except (OSError, ValueError):
                stamp = None
        blocked_now = is_blocked(candidate, blocked)
        parts.append([candidate.name, candidate.source, candidate.distribution,
                      candidate.version, stamp, blocked_now])
        names.append((candidate.name, blocked_now))
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    return digest, names


def _disabled_in_config() -> list[str]:
    """``plugins.disabled`` read straight from the YAML (the validated config needs pydantic, which
    --help must not import); a broken file counts as none disabled, and its command says why."""
    import yaml

    from ..paths import config_path

    try:
        raw = yaml.safe_load(config_path().read_text(encoding="utf-8")) or {}
        disabled = (raw.get("plugins") or {}).get("disabled") or []
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        return []
    return [str(name) for name in disabled] if isinstance(disabled, list) else []


def _cache_file() -> Path:
    from ..paths import home_dir

    return home_dir() / "cache" / "commands.json"


def command_index() -> dict[str, CommandEntry]:
    """Plugin commands by name (a disabled plugin's too, marked), without importing third-party
    plugins: from the index when it is current; else the built-ins' (imported: they ship with the
    kernel) and what the index last knew of the third-party plugins still installed."""
    digest, names = _key()
    data = _read()
    entries = {e["name"]: CommandEntry(**e) for e in data.get("commands", [])}
    if data.get("key") == digest:
        return entries
    from ..host import PluginHost
    from ..loader import BUILTIN_PLUGINS
    from ._common import load_config_or_defaults

    present = {name: blocked for name, blocked in names}
    config, _error = load_config_or_defaults()
    builtins = PluginHost.load(config=config, entry_points=False, directories=False)
    out = {name: CommandEntry(name, plugin, _help(command), True)
           for name, (command, plugin) in builtins.commands.items()}
    for name, entry in entries.items():
        if entry.plugin in BUILTIN_PLUGINS and not present.get(entry.plugin, False):
            continue  # the built-ins were just asked
        if entry.plugin in present and name not in out:
            out[name] = CommandEntry(name, entry.plugin, entry.help, not present[entry.plugin])
    # Written with the current key: a third-party plugin installed since the index was last
    # complete shows its commands in --help once any command has loaded the plugins.
    _write(digest, out)
    return out


def remember_commands(host: PluginHost) -> None:
    """Write the index from a fully loaded host (every command that loads the plugins calls it)."""
    digest, names = _key()
    blocked = {name for name, is_blocked in names if is_blocked}
    old = _read()
    entries = {name: CommandEntry(name, plugin, _help(command), True)
               for name, (command, plugin) in host.commands.items()}
    for e in old.get("commands", []):  # what a disabled plugin offered when it was enabled
        if e.get("plugin") in blocked:
            entries.setdefault(e["name"], CommandEntry(e["name"], e["plugin"], e.get("help", ""),
                                                       False))
    if old.get("key") == digest and old.get("commands") == [_as_dict(e) for e in entries.values()]:
        return
    _write(digest, entries)


def _write(digest: str, entries: dict[str, CommandEntry]) -> None:
    from ..private import private_dir, write_private_text

    path = _cache_file()
    try:
        private_dir(path.parent)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        write_private_text(tmp, json.dumps({"key": digest, "commands": [
            _as_dict(e) for e in entries.values()]}, indent=1))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home: work without the index
        log.debug("cannot write the command index %s: %s", path, exc)


def _as_dict(entry: CommandEntry) -> dict[str, Any]:
    return {"name": entry.name, "plugin": entry.plugin, "help": entry.help,
            "enabled": entry.enabled}


def _help(command: Any) -> str:
    return str(command.get_short_help_str(60) or "")


def _read() -> dict[str, Any]:
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_plugin_command(name: str) -> click.Command | None:
    """The plugin command ``name``; a command that explains when its plugin is disabled; or None."""
    _digest, names = _key()
    blocked = {plugin for plugin, is_blocked in names if is_blocked}
    known = {e["name"]: e.get("plugin") for e in _read().get("commands", [])}
    if known.get(name) in blocked:
        return _disabled(name, str(known[name]))
    from ._common import load_host

    host = load_host(tolerate_bad_config=True, warn_config=False)
    found = host.commands.get(name)
    if found is not None:
        command: click.Command = found[0]
        return command
    disabled = sorted(r.name for r in host.records.values() if not r.enabled)
    if disabled:  # never imported, so what they offer is unknown: say so instead of "no such"
        return _unknown(name, disabled)
    return None


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
