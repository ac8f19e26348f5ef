"""The hermes-core plugin that offers ``hermes-core import hermes [PATH]``.

Registered under the kernel's ``import`` group (``register(command, group="import")``); the
command is a thin layer over :func:`.run.import_hermes`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hermes_core import hookimpl

__all__ = ["hermes_command", "register_commands"]


@click.command("hermes")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--dry-run", is_flag=True,
              help="Read and check everything, write nothing; say what would be imported.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def hermes_command(path: Path | None, dry_run: bool, as_json: bool) -> None:
    """Import a Hermes Agent home: state.db sessions (with their compaction lineage),
    MEMORY.md/USER.md, skills, and its memory provider.

    PATH defaults to $HERMES_HOME or ~/.hermes. Safe to run again: what is already here is
    skipped. Exits with 1 when something was left out (each named, with the fix).
    """
    from hermes_core.commands import echo_json, load_host, progress_bars, warn

    from .home import default_home
    from .run import import_hermes

    host = load_host()
    try:
        with progress_bars(host, as_json) as progress:
            report = import_hermes(host, path or default_home(), dry_run=dry_run,
                                   progress=progress)
    finally:
        host.shutdown()
    if as_json:
        echo_json(report.to_dict())
    else:
        _print(report.to_dict())
    for problem in report.problems:
        warn(problem)
    if not report.complete:
        raise SystemExit(1)


def _print(data: dict[str, Any]) -> None:
    verb = "would import" if data["dry_run"] else "imported"
    click.echo(f"{'dry run: ' if data['dry_run'] else ''}Hermes home {data['source']}")
    sessions = data["sessions"]
    if "note" in sessions:
        click.echo(f"  sessions: {sessions['note']}")
    elif "imported" in sessions:
        done, there = sessions["imported"], sessions["already_there"]
        click.echo(f"  sessions: {verb} {done.get('sessions', 0)} with "
                   f"{done.get('messages', 0)} message(s); {there.get('sessions', 0)} already here")
        for reason, n in sessions["left"].items():
            click.echo(f"    left out: {n} {reason}")
    for part in data["memory"]:
        click.echo(f"  {part['file']}: {part['entries']} entries; {verb} {part['added']}, "
                   f"{part['already_there']} already here, {len(part['left'])} left out")
    skills = data["skills"]
    click.echo(f"  skills: {verb} {len(skills['created'])}, {len(skills['already_there'])} "
               f"already here, {skills['bundled_skipped']} bundled with Hermes skipped, "
               f"{len(skills['left'])} left out")
    for note in skills["notes"]:
        click.echo(f"    {note}")
    provider = data["provider"]
    if provider and provider["provider"] is None:
        click.echo(f"  memory provider: Hermes' {provider['hermes']!r} is {provider['status']}")
    elif provider:
        click.echo(f"  memory provider: Hermes' {provider['hermes']!r} -> {provider['provider']!r}:"
                   f" {provider['status']}")


@hookimpl
def register_commands(register: Any) -> None:
    register(hermes_command, group="import")
