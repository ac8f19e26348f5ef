"""``hermes-core hermes ...``: the bridge's commands (registered through ``register_commands``),
and the Hermes plugins' own commands under it (:mod:`.hermes_commands`)."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["hermes_group"]


class _HermesGroup(click.Group):
    """The ``hermes`` group: its own commands, and any other name looked up as a Hermes
    plugin's CLI command (``hermes NAME`` in Hermes), only when it is run."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        own = super().get_command(ctx, cmd_name)
        if own is not None or cmd_name.startswith("-"):
            return own
        return _plugin_cli_command(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if not name or name.startswith("-"):
            return super().resolve_command(ctx, args)
        command = self.get_command(ctx, name)
        if command is None:
            ctx.fail(f"no command {name!r}: it is neither one of 'hermes-core hermes' nor a "
                     "CLI command of an installed Hermes plugin ('hermes-core hermes plugins' "
                     "lists each plugin's commands)")
        return name, command, args[1:]


def _home() -> Any:
    from hermes_core.paths import home_dir

    return home_dir()


def _plugin_cli_command(name: str) -> click.Command | None:
    from .hermes_commands import CommandClash, find, refusal, run_cli

    found = find(_home(), "cli", name)
    if found is None:
        return None

    @click.command(name, context_settings={"ignore_unknown_options": True,
                                           "allow_extra_args": True, "help_option_names": []})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def run(args: tuple[str, ...]) -> None:
        if isinstance(found, CommandClash):
            raise click.ClickException(refusal(found))
        code = run_cli(found, _home(), list(args))
        if code:
            raise SystemExit(code)

    return run


@click.group("hermes", cls=_HermesGroup)
def hermes_group() -> None:
    """Hermes Agent plugins in hermes-core (the hermes-core-hermes-compat bridge).

    A Hermes plugin's CLI command (`hermes NAME ...` in Hermes) runs as
    `hermes-core hermes NAME ...`; its slash command (`/NAME args` in Hermes' chat) as
    `hermes-core hermes slash NAME args`. `hermes-core hermes plugins` lists them.
    """


@hermes_group.command("slash", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def slash_command(name: str, args: tuple[str, ...]) -> None:
    """Run a Hermes plugin's slash command (`/NAME ARGS` in Hermes' chat) and print its answer."""
    from .hermes_commands import CommandClash, find, refusal, run_slash

    clean = name.lower().strip().lstrip("/")
    found = find(_home(), "slash", clean)
    if found is None:
        raise click.ClickException(
            f"no Hermes plugin registers the slash command /{clean} ('hermes-core hermes "
            "plugins' lists each plugin's commands)")
    if isinstance(found, CommandClash):
        raise click.ClickException(refusal(found))
    answer = run_slash(found, _home(), " ".join(args))
    if answer:
        click.echo(answer)


@hermes_group.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins_command(as_json: bool) -> None:
    """List every Hermes plugin found, where from, and whether it runs here.

    Statuses: ready; needs service or key; needs hermes-agent; failed (with the error and the
    fix). Finding out imports each plugin (nothing else imports one until it is selected).
    """
    from hermes_core.commands import echo_json

    from .discovery import FOLDER_NAME
    from .status import statuses

    home = _home()
    found = statuses(home)
    if as_json:
        echo_json({"plugins": [s.as_dict() for s in found]})
        return
    if not found:
        click.echo("No Hermes plugins found. Install one with pip, or copy a Hermes folder plugin "
                   f"into {home / FOLDER_NAME}/<name>/.")
        return
    for s in found:
        origin = f"{s.distribution} {s.version}" if s.distribution else (s.path or s.source)
        click.echo(f"{s.name}  [{s.kind}]  {s.status}  ({origin})")
        if s.detail:
            click.echo(f"    {s.detail}")
        if s.fix and s.status != "ready":
            click.echo(f"    fix: {s.fix}")
        if s.skipped:
            click.echo(f"    skipped registrations hermes-core does not support: {', '.join(s.skipped)}")
        if s.hooks or s.tools:
            click.echo(f"    runs: {', '.join([*s.hooks, *(f'tool {t}' for t in s.tools)])}")
        for command in s.commands:
            click.echo(f"    command: {command}")
        for item in s.unmapped:
            click.echo(f"    not delivered: {item}")
