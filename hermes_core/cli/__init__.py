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
    "forget": "hermes_core.cli.forget_cmd:forget",
    "import": "hermes_core.cli.import_cmd:import_group",
    "plugins": "hermes_core.cli.plugins_cmd:plugins",
    "serve": "hermes_core.cli.serve_cmd:serve",
    "setup": "hermes_core.cli.setup_cmd:setup",
    "storage": "hermes_core.cli.storage_cmd:storage",
}

#: the kernel commands' short help, so ``--help`` imports none of them (a test keeps it equal to
#: each command's own)
SHORT_HELP: dict[str, str] = {
    "chat": "Chat with the agent in the terminal; replies stream as they are written.",
    "config": "Read, change and check config.yaml.",
    "context": "Inspect what the context engine would do with a history.",
    "doctor": "Check the home folder, config, plugins, state.db and the API key.",
    "forget": "Delete everything the memory providers keep that mentions TEXT.",
    "import": "Bring another agent's history and memory into this home (importers are plugins).",
    "plugins": "List, install and switch plugins.",
    "serve": "Serve the agent over HTTP: POST a signed JSON message, get the reply.",
    "setup": "Write config.yaml by answering a few questions (every one is also a flag).",
    "storage": "Where the stores keep their data (SQLite files or one PostgreSQL database).",
}


class LazyGroup(click.Group):
    """The kernel's commands, imported on first use, and the plugins' (``register_commands``)."""

    @staticmethod
    def _index(ctx: click.Context) -> dict[str, Any]:
        """The plugin command index, read once per invocation (checking it costs a scan of the
        installed distributions and the config file)."""
        index: dict[str, Any] | None = ctx.meta.get("hermes_core.command_index")
        if index is None:
            from ._plugin_commands import index_state

            entries, unasked = index_state()
            ctx.meta["hermes_core.unasked_plugins"] = unasked
            index = ctx.meta["hermes_core.command_index"] = {
                e.name: e for e in entries.values() if e.group is None}
        return index

    def list_commands(self, ctx: click.Context) -> list[str]:
        plugin = [name for name, entry in self._index(ctx).items() if entry.enabled]
        return sorted({*COMMANDS, *self.commands, *plugin})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            from ._plugin_commands import load_plugin_command

            return load_plugin_command(cmd_name)
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Plugin commands are listed from the index: --help imports no plugin.
        index = self._index(ctx)
        rows = []
        width = formatter.width - 6 - max((len(n) for n in [*COMMANDS, *index]), default=0)
        for name in self.list_commands(ctx):
            entry = index.get(name)
            if name in SHORT_HELP and name not in self.commands:
                text = click.Command(name, help=SHORT_HELP[name]).get_short_help_str(width)
            elif name in COMMANDS or name in self.commands or entry is None:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                text = command.get_short_help_str(width)
            else:
                text = click.Command(name, help=entry.help).get_short_help_str(width)
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        unasked = ctx.meta.get("hermes_core.unasked_plugins") or []
        if unasked:  # installed since a command last loaded the plugins: never imported here
            formatter.write_paragraph()
            formatter.write_text(
                f"Not listed yet: the commands (if any) of {', '.join(unasked)}, installed since "
                "the list was made; any command that loads the plugins ('hermes-core plugins "
                "list') adds them.")

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
    'hermes-core setup', then 'hermes-core doctor'.
    """
    if home:
        os.environ["HERMES_CORE_HOME"] = home
    if os.environ.get("NO_COLOR"):  # https://no-color.org: any non-empty value
        ctx.color = False
    ctx.obj = {"debug": debug}
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:  # the terminal: warnings and errors only
        handler.setLevel(logging.DEBUG if debug else logging.WARNING)
    if ctx.invoked_subcommand is not None and not ctx.resilient_parsing:
        from .._logfile import setup_file_log
        from ..paths import home_dir

        if setup_file_log(home_dir(), level="DEBUG" if debug else None) is not None:
            logging.getLogger("hermes_core.cli").info("hermes-core %s: %s", __version__,
                                                      ctx.invoked_subcommand)


def main(argv: list[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=argv, prog_name="hermes-core")
