"""The ``hermes-core`` command: a thin click layer over the library.

Sub-commands are imported only when invoked (or when ``--help`` lists them), and no sub-command
module imports a plugin at import time, so ``--help`` and ``--version`` stay fast however many
plugins are installed.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

import click

from .._version import __version__

__all__ = ["cli", "main"]

#: command name -> "module:attribute" of its click command, imported on first use
COMMANDS: dict[str, str] = {
    "chat": "hermes_core.cli.chat_cmd:chat",
    "config": "hermes_core.cli.config_cmd:config",
    "context": "hermes_core.cli.context_cmd:context",
    "doctor": "hermes_core.cli.doctor_cmd:doctor",
    "memory": "hermes_core.cli.memory_cmd:memory",
    "plugins": "hermes_core.cli.plugins_cmd:plugins",
    "replay": "hermes_core.cli.replay_cmd:replay",
    "serve": "hermes_core.cli.serve_cmd:serve",
    "sessions": "hermes_core.cli.sessions_cmd:sessions",
    "skills": "hermes_core.cli.skills_cmd:skills",
    "storage": "hermes_core.cli.storage_cmd:storage",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        # User errors from the library become click errors: a message and exit 1, no traceback
        # (unless --debug, which re-raises so the traceback shows).
        from ..errors import HermesCoreError

        try:
            return super().invoke(ctx)
        except HermesCoreError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            raise click.ClickException(str(exc)) from exc


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="hermes-core")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    envvar="HERMES_CORE_HOME",
    help="The home folder (default: $HERMES_CORE_HOME or ~/.hermes-core).",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, home: str | None) -> None:
    """hermes-core: the plugin kernel of an agent's memory and context.

    Memory providers, context engines, tools and platforms are plugins. Start with
    'hermes-core plugins list' and 'hermes-core doctor'.
    """
    if home:
        os.environ["HERMES_CORE_HOME"] = home
    ctx.obj = {"debug": debug}
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="hermes-core")
