"""The index of plugin commands, so ``hermes-core --help`` imports no plugin.

Knowing a plugin's commands means importing it. ``hermes-core --help`` must stay fast with many
plugins installed, so the names and one-line helps are kept in ``$HERMES_CORE_HOME/cache/
commands.json``, keyed by what decides them: the kernel's version, every plugin candidate (name,
source, distribution and version, a directory plugin's modification time) and the blocked names.
Every command that loads the plugins rewrites it (:func:`remember_commands`) when it changed.
It holds the commands plugins add to the kernel's groups too (``plugins new``), each entry naming
its group; the index's entries are keyed by the command as typed (:func:`spelled`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..host import PluginHost

__all__ = ["CommandEntry", "asked_of", "entries_of", "index_key", "raw_plugins_section", "read_index",
           "remember_commands", "short_help", "spelled", "write_index"]

log = logging.getLogger("hermes_core.cli")


@dataclass(frozen=True, slots=True)
class CommandEntry:
    name: str
    plugin: str
    help: str
    enabled: bool
    #: the kernel group it is a sub-command of (``plugins``), None for a top-level command
    group: str | None = None


def spelled(name: str, group: str | None) -> str:
    """A command as typed after ``hermes-core``: ``eval``, ``plugins new``."""
    return name if group is None else f"{group} {name}"


def entries_of(host: PluginHost) -> dict[str, CommandEntry]:
    """Every command a loaded host's plugins offer, keyed as typed."""
    out = {name: CommandEntry(name, plugin, short_help(command), True)
           for name, (command, plugin) in host.commands.items()}
    for group, table in host.subcommands.items():
        for name, (command, plugin) in table.items():
            out[spelled(name, group)] = CommandEntry(name, plugin, short_help(command), True, group)
    return out


def index_key() -> tuple[str, list[Any]]:
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
    disabled = (raw_plugins_section() or {}).get("disabled") or []
    return [str(name) for name in disabled] if isinstance(disabled, list) else []


def raw_plugins_section() -> dict[str, Any] | None:
    """The ``plugins`` section of config.yaml as written, unvalidated ({} when there is none);
    None when the file cannot be read or parsed, or the section is not a mapping."""
    import yaml

    from ..paths import config_path

    try:
        raw = yaml.safe_load(config_path().read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, yaml.YAMLError):
        return None
    section = raw.get("plugins") if isinstance(raw, dict) else None
    if section is None:
        return {} if isinstance(raw, dict) else None
    return section if isinstance(section, dict) else None


def _cache_file() -> Path:
    from ..paths import home_dir

    return home_dir() / "cache" / "commands.json"


def remember_commands(host: PluginHost) -> None:
    """Write the index from a fully loaded host (every command that loads the plugins calls it)."""
    digest, names = index_key()
    blocked = {name for name, is_blocked in names if is_blocked}
    old = read_index()
    entries = entries_of(host)
    for e in old.get("commands", []):  # what a disabled plugin offered when it was enabled
        if e.get("plugin") in blocked:
            group = e.get("group")
            entries.setdefault(spelled(e["name"], group), CommandEntry(
                e["name"], e["plugin"], e.get("help", ""), False, group))
    asked = sorted(host.records)
    if (old.get("key") == digest and old.get("asked") == asked
            and old.get("commands") == [_as_dict(e) for e in entries.values()]):
        return
    write_index(digest, entries, asked)


def write_index(digest: str, entries: dict[str, CommandEntry], asked: list[str]) -> None:
    """``asked``: the plugins whose commands the entries are (a plugin with none among them)."""
    from ..private import private_dir, write_private_text

    path = _cache_file()
    try:
        private_dir(path.parent)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        write_private_text(tmp, json.dumps({"key": digest, "asked": asked, "commands": [
            _as_dict(e) for e in entries.values()]}, indent=1))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home: work without the index
        log.debug("cannot write the command index %s: %s", path, exc)


def _as_dict(entry: CommandEntry) -> dict[str, Any]:
    group = {} if entry.group is None else {"group": entry.group}
    return {"name": entry.name, "plugin": entry.plugin, "help": entry.help,
            "enabled": entry.enabled, **group}


def short_help(command: Any) -> str:
    """The command's first sentence, whole: ``--help`` shortens it to the terminal's width, as it
    does the kernel's commands'."""
    return str(command.get_short_help_str(1000) or "")


def asked_of(data: dict[str, Any]) -> set[str]:
    """The plugins whose commands an index read by :func:`read_index` knows (an index written
    before it recorded them: those with a command in it)."""
    asked = data.get("asked")
    named = {str(e.get("plugin")) for e in data.get("commands", [])}
    return named | ({str(n) for n in asked} if isinstance(asked, list) else set())


def read_index() -> dict[str, Any]:
    """The index as written, or {} (rebuilt by the next command that loads the plugins) when it
    is missing, unreadable, or not of this version's shape: a list of entries with exactly
    :class:`CommandEntry`'s fields, of their types."""
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    commands = data.get("commands", [])
    if not isinstance(commands, list) or not all(_entry_shape(e) for e in commands):
        return {}
    return data


def _entry_shape(entry: object) -> bool:
    if not isinstance(entry, dict) or not {"name", "plugin", "help", "enabled"} <= entry.keys():
        return False
    if not entry.keys() <= {"name", "plugin", "help", "enabled", "group"}:
        return False
    return (all(isinstance(entry[k], str) for k in ("name", "plugin", "help"))
            and isinstance(entry["enabled"], bool)
            and (entry.get("group") is None or isinstance(entry["group"], str)))
