"""``hermes-core hermes ...``: the bridge's commands (registered through ``register_commands``)."""

from __future__ import annotations

import click

__all__ = ["hermes_group"]


@click.group("hermes")
def hermes_group() -> None:
    """Hermes Agent plugins in hermes-core (the hermes-core-hermes-compat bridge)."""


@hermes_group.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def plugins_command(as_json: bool) -> None:
    """List every Hermes plugin found, where from, and whether it runs here.

    Statuses: ready; needs service or key; needs hermes-agent; failed (with the error and the
    fix). Finding out imports each plugin (nothing else imports one until it is selected).
    """
    from hermes_core.commands import echo_json
    from hermes_core.paths import home_dir

    from .discovery import FOLDER_NAME
    from .status import statuses

    home = home_dir()
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
        for item in s.unmapped:
            click.echo(f"    not delivered: {item}")
