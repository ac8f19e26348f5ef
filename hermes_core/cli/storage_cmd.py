"""``hermes-core storage``: where the built-in stores keep their data, and moving it.

``storage show`` prints the backend in effect (the URL with its password hidden) and the schema
versions; ``storage migrate --to URL`` copies this home's session archive (state.db) and curated
memory (memories/, per-user folders included) into a PostgreSQL database, with a progress bar.
Then set ``storage.url`` (or ``HERMES_CORE_STORAGE_URL``) to that URL. See docs/storage.md.
"""

from __future__ import annotations

from typing import Any

import click

from ._common import echo_json

__all__ = ["storage"]


@click.group()
def storage() -> None:
    """Where the stores keep their data (SQLite files or one PostgreSQL database)."""


@storage.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(as_json: bool) -> None:
    """The storage in effect, and the schema version of each store in the database."""
    from ..config import load_config
    from ..paths import home_dir
    from ..storage import close_pools, get_pool, resolve_storage_url
    from ..storage.migrations import schema_versions

    url = resolve_storage_url(load_config().core.storage.url)
    if url is None:
        out: dict[str, Any] = {"backend": "sqlite", "home": str(home_dir())}
    else:
        pool: Any = get_pool(url)
        with pool.connection() as con:
            versions = schema_versions(con)
        close_pools()
        out = {"backend": "postgresql", "url": url.redacted, "schema": versions}
    if as_json:
        echo_json(out)
    elif url is None:
        click.echo(f"SQLite files in {out['home']} (storage.url is not set)")
    else:
        click.echo(f"PostgreSQL at {out['url']}")
        for component, version in sorted(out["schema"].items()):
            click.echo(f"  {component}: schema {version}")


@storage.command("migrate")
@click.option("--to", "to_url", required=True, metavar="URL",
              help="The PostgreSQL database to copy this home's data into.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def migrate(to_url: str, as_json: bool) -> None:
    """Copy this home's sessions and curated memory into the database at URL.

    Safe to run again: sessions already there are skipped, memory already there is kept.
    """
    from ..config import load_config, validate_section
    from ..errors import HermesCoreError
    from ..paths import home_dir
    from ..plugins.memory.file_memory import FileMemoryConfig, MemoryStore
    from ..plugins.memory.file_memory.pg_store import PgMemoryStore
    from ..plugins.memory.file_memory.store import TARGETS
    from ..plugins.memory.session_archive import SessionArchive, SessionArchiveConfig, archive_path
    from ..plugins.memory.session_archive.pg_store import PgSessionArchive
    from ..plugins.memory.session_archive.transfer import export_lines, import_jsonl
    from ..storage import close_pools, parse_storage_url
    from ..storage.transfer import MigrationReport, copy_memory, copy_sessions

    try:
        url = parse_storage_url(to_url)
    except HermesCoreError as exc:
        raise click.BadParameter(str(exc), param_hint="--to") from None
    config = load_config()
    home = home_dir()
    archive_settings = validate_section(config, "session_archive", SessionArchiveConfig,
                                        plugin="session_archive")
    memory_settings = validate_section(config, "file_memory", FileMemoryConfig,
                                       plugin="file_memory")
    report = MigrationReport()
    target = PgSessionArchive(url)
    try:
        path = archive_path(archive_settings, home)
        if path.exists():
            with SessionArchive(path, background_checkpoints=False) as source:
                _with_progress(as_json, lambda progress: copy_sessions(
                    source, target, export_lines=export_lines, import_jsonl=import_jsonl,
                    report=report, progress=progress))
        limits = {"memory_limit": memory_settings.memory_char_limit,
                  "user_limit": memory_settings.user_char_limit}
        sources: list[tuple[str, Any]] = []
        base = home / "memories"
        if base.is_dir():
            sources.append(("", MemoryStore(base, **limits)))
            users = base / "users"
            if users.is_dir():
                sources += [(d.name, MemoryStore(d, **limits))
                            for d in sorted(users.iterdir()) if d.is_dir()]
        copy_memory(sources, lambda owner: PgMemoryStore(url, owner=owner, **limits),
                    TARGETS, report)
    finally:
        close_pools()
    if as_json:
        echo_json({"to": url.redacted, **report.to_dict()})
        return
    click.echo(f"copied {report.sessions_copied} session(s), {report.messages_copied} "
               f"message(s) into {url.redacted}; {report.sessions_skipped} already there")
    for label in report.memory_copied:
        click.echo(f"memory {label}: copied")
    for label in report.memory_kept:
        click.echo(f"memory {label}: the database already holds other entries; left as they are")
    click.echo("Now set storage.url (or HERMES_CORE_STORAGE_URL) to use the database.")


def _with_progress(quiet: bool, run: Any) -> None:
    """Run ``run(progress)`` under a rich progress bar (none with --json or without a terminal)."""
    if quiet:
        run(None)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        run(None)
        return
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console) as bar:
        task = bar.add_task("sessions", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        run(progress)
