"""Hermes plugins' commands on hermes-core's command line.

Hermes 0.19.0 has two kinds: a CLI command (``ctx.register_cli_command``: ``hermes NAME ...``,
argparse) and an in-chat slash command (``ctx.register_command``: ``/NAME args``, a function of
the argument text). ``hermes-core chat`` has a fixed set of slash commands no plugin extends, so
both run from the command line, inside the bridge's ``hermes`` group:

* ``hermes NAME ARGS...``  ->  ``hermes-core hermes NAME ARGS...`` (the plugin's own argparse
  parser, ``--help`` included);
* ``/NAME ARGS``           ->  ``hermes-core hermes slash NAME ARGS...`` (the answer printed).

A name is looked up among the Hermes plugins found (each imported to read what it registers: only
when such a command is run or listed). A name that is one of the ``hermes`` group's own commands,
or that two Hermes plugins register, is refused with a message naming both. Each command runs with
the plugin's ``hermes_home`` (``$HERMES_CORE_HOME/hermes-compat/<plugin>/``) as Hermes' home; its
``ctx.llm`` asks hermes-core's main model (the host is loaded on the first such call).
"""

from __future__ import annotations

import argparse
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path

from hermes_core.kinds import PluginContext

from . import calls
from .discovery import HermesCandidate, discover
from .general import RegisteredCommand, awaited
from .host_access import HostAccess
from .loading import HermesLoadError, deadline, load

__all__ = ["CommandClash", "FoundCommand", "find", "refusal", "run_cli", "run_slash", "spelled"]


@dataclass
class FoundCommand:
    """A command and the Hermes plugin that registered it."""

    candidate: HermesCandidate
    command: RegisteredCommand


@dataclass
class CommandClash:
    """A name more than one Hermes plugin claims."""

    name: str
    kind: str
    owners: list[str] = field(default_factory=list)


def _command_context(home: Path) -> PluginContext:
    """The kernel's context of a command's process: its host is loaded (not activated) the first
    time the plugin asks for the model (``ctx.llm``)."""
    from hermes_core.host import PluginHost

    host = PluginHost.load(home)
    return PluginContext(plugin_name="hermes_compat", home=home, config=host.config.core,
                         logger=logging.getLogger("hermes_core.plugins.hermes_compat"),
                         llm=host.llm)


def commands_of(candidate: HermesCandidate, home: Path) -> list[RegisteredCommand]:
    """The commands ``candidate``'s ``register(ctx)`` registers ([] when it does not load)."""
    calls.point_env(home)
    try:
        return load(candidate, calls.hermes_home_for(home, candidate.plugin, None),
                    HostAccess(make=functools.partial(_command_context, home)),
                    timeout=deadline(home)).registered.commands
    except HermesLoadError:
        return []


def find(home: Path, kind: str, name: str) -> FoundCommand | CommandClash | None:
    """The ``kind`` (``cli`` or ``slash``) command ``name`` of the Hermes plugins found; a
    :class:`CommandClash` when two plugins register it; ``None`` when no plugin does. (A CLI
    name of the ``hermes`` group's own is never looked up: hermes-core's command runs, and
    ``hermes-core hermes plugins`` lists the plugin's as refused.)"""
    found = [FoundCommand(c, cmd) for c in discover(home) if c.clash is None
             for cmd in commands_of(c, home) if cmd.kind == kind and cmd.name == name]
    owners = [f"Hermes plugin {f.candidate.plugin!r} ({f.command.spelled})" for f in found]
    if len(found) > 1:
        return CommandClash(name, kind, owners)
    return found[0] if found else None


def spelled(kind: str, name: str) -> str:
    """How hermes-core runs a Hermes command of ``kind`` (``cli`` or ``slash``)."""
    return f"hermes-core hermes slash {name}" if kind == "slash" else f"hermes-core hermes {name}"


def refusal(clash: CommandClash) -> str:
    """The message refusing a clashing name, naming every owner and the fix."""
    return (f"'{spelled(clash.kind, clash.name)}' is refused: the name {clash.name!r} is claimed "
            f"by {' and by '.join(clash.owners)}. Uninstall one of the Hermes plugins.")


def run_cli(found: FoundCommand, home: Path, args: list[str]) -> int:
    """Run a Hermes CLI command as ``hermes`` does: its ``setup_fn`` fills an argparse parser,
    the parsed namespace goes to the ``func`` it set (or ``handler_fn``). The exit code: the
    handler's int answer, else 0 (``SystemExit`` from argparse's ``--help`` or an error kept)."""
    command = found.command
    parser = argparse.ArgumentParser(prog=f"hermes-core hermes {command.name}",
                                     description=command.help or None)
    with calls.in_home(calls.hermes_home_for(home, found.candidate.plugin, None)):
        if command.setup_fn is not None:
            command.setup_fn(parser)
        if command.handler is not None:
            parser.set_defaults(func=command.handler)
        try:
            namespace = parser.parse_args(args)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        handler = getattr(namespace, "func", None)
        if not callable(handler):
            parser.print_help()
            return 2
        value = awaited(handler(namespace))
    if isinstance(value, str):
        print(value)
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def run_slash(found: FoundCommand, home: Path, raw_args: str) -> str | None:
    """Run a Hermes slash command's handler with the argument text; its answer (text, or
    ``None``)."""
    assert found.command.handler is not None
    with calls.in_home(calls.hermes_home_for(home, found.candidate.plugin, None)):
        value = awaited(found.command.handler(raw_args))
    return None if value is None else str(value)
