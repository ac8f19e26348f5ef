"""The CLI commands plugins offer through ``register_commands``: the kernel's reserved names and
groups, the checks one registration passes, and how it is filed.

A loaded host files every plugin's commands here (:mod:`._loading`). :func:`commands_of` asks one
plugin alone, through a plugin manager holding only it and the typed hook facade, with no host and
no config: how the command line builds a built-in plugin's command without importing every plugin
(see :mod:`hermes_core.cli._plugin_commands`).
"""

from __future__ import annotations

from typing import Any

from .errors import RegistryError

__all__ = ["COMMAND_GROUPS", "RESERVED_COMMANDS", "RESERVED_SUBCOMMANDS", "CommandTable",
           "commands_of", "file_command"]

#: the kernel's own sub-commands, which no plugin may register
RESERVED_COMMANDS = frozenset({"chat", "config", "context", "doctor", "forget", "import", "plugins",
                               "serve", "setup", "storage"})
#: the kernel's command groups plugins add sub-commands to: ``register(command, group="import")``
#: makes ``hermes-core import NAME``; the built-in ``scaffold`` adds ``plugins new``
COMMAND_GROUPS = frozenset({"import", "plugins"})
#: the kernel's own sub-commands of those groups, which no plugin may register under them
RESERVED_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "import": frozenset(),
    "plugins": frozenset({"disable", "enable", "install", "list", "uninstall"}),
}

#: command name -> (click command, plugin)
CommandTable = dict[str, tuple[Any, str]]


def file_command(plugin: str, command: Any, *, group: str | None = None,
                 commands: CommandTable, subcommands: dict[str, CommandTable]) -> str:
    """Check one registration of ``plugin`` and file it in ``commands`` (or under its group in
    ``subcommands``); returns the command as typed (``import hermes``). Raises RegistryError."""
    import click

    if not isinstance(command, click.Command) or not command.name:
        raise RegistryError(
            f"plugin {plugin!r}: register_commands got {command!r}; register a "
            "click.Command or click.Group that has a name")
    name = command.name
    if group is not None and group not in COMMAND_GROUPS:
        raise RegistryError(
            f"plugin {plugin!r} registers {name!r} under {group!r}, which is not "
            f"a kernel command group (those are: {', '.join(sorted(COMMAND_GROUPS))})")
    if group is None and name in RESERVED_COMMANDS:
        raise RegistryError(
            f"plugin {plugin!r} registers the command {name!r}, which is the "
            "kernel's own; rename the plugin's command")
    spelled = name if group is None else f"{group} {name}"
    if group is not None and name in RESERVED_SUBCOMMANDS.get(group, frozenset()):
        raise RegistryError(
            f"plugin {plugin!r} registers the command {spelled!r}, which is the "
            "kernel's own; rename the plugin's command")
    table = commands if group is None else subcommands.setdefault(group, {})
    owner = table.get(name)
    if owner is not None:
        raise RegistryError(
            f"command {spelled!r} is registered by both {owner[1]!r} and "
            f"{plugin!r}; {owner[1]!r} keeps it. Disable one of them or rename one "
            "command")
    table[name] = (command, plugin)
    return spelled


def commands_of(plugin: str, obj: object, group: str | None = None) -> CommandTable | None:
    """The top-level commands ``obj`` registers as the plugin ``plugin`` (or those it adds to the
    kernel group ``group``), asked with no other plugin loaded; None when it cannot be registered
    or its ``register_commands`` fails (loading it into a host then records why)."""
    import pluggy

    from .hooks import MODULE, Hooks
    from .hookspecs import create_plugin_manager

    pm = create_plugin_manager()
    try:
        pm.register(obj, name=plugin)
    except (pluggy.PluginValidationError, ValueError):
        return None
    commands: CommandTable = {}
    subcommands: dict[str, CommandTable] = {}
    # Registry hooks run inline on the caller's thread, without a deadline: no timeout is asked.
    hooks = Hooks(pm, kind_of=lambda _key: MODULE, timeout_of=lambda _hook: 0.0)

    def register(command: Any, *, group: str | None = None) -> None:
        file_command(plugin, command, group=group, commands=commands, subcommands=subcommands)

    outcomes = hooks.register_commands(register=register, only=plugin)
    if any(o.error is not None for o in outcomes):
        return None
    return commands if group is None else subcommands.get(group, {})
