"""``hermes-core storage``: where the built-in stores keep their data, and moving it.

``storage show`` prints the backend in effect (the URL with its password hidden) and the schema
versions; ``storage migrate --to URL`` copies this home's session archive (state.db), curated
memory (memories/, per-user folders included, with history and pins), skills and the lossless
engine's archive (context.db) into a PostgreSQL database, with a progress bar.
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
@click.option("--to", "to_url", metavar="URL",
              help="The PostgreSQL database to copy this home's data into.")
@click.option("--from", "from_url", metavar="URL",
              help="The way back: copy the database's data into this home's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def migrate(to_url: str | None, from_url: str | None, as_json: bool) -> None:
    """Copy this home's sessions, curated memory (with its history and pins), skills and the
    lossless engine's archive into the database at URL (--to), or back (--from).

    Safe to run again: what is already there is skipped or kept, never overwritten.
    """
    from ..errors import HermesCoreError
    from ..storage import close_pools, parse_storage_url
    from ..storage.transfer import MigrationReport

    if (to_url is None) == (from_url is None):
        raise click.UsageError("give exactly one of --to URL (this home into the database) or "
                               "--from URL (the database into this home)")
    hint = "--to" if to_url is not None else "--from"
    try:
        url = parse_storage_url(to_url or from_url or "")
    except HermesCoreError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None
    into_db = to_url is not None
    report = MigrationReport()
    try:
        _migrate_sessions(url, report, as_json, into_db)
        _migrate_memory(url, report, into_db)
        _migrate_skills(url, report, into_db)
        _migrate_lossless(url, report, into_db)
    finally:
        close_pools()
    if as_json:
        echo_json({("to" if into_db else "from"): url.redacted, **report.to_dict()})
        return
    where = f"into {url.redacted}" if into_db else f"from {url.redacted} into this home"
    click.echo(f"copied {report.sessions_copied} session(s), {report.messages_copied} "
               f"message(s) {where}; {report.sessions_skipped} already there")
    for label in report.memory_copied:
        click.echo(f"memory {label}: copied")
    for label in report.memory_kept:
        click.echo(f"memory {label}: the database already holds other entries; left as they are")
    click.echo(f"memory history: {report.memory_versions_copied} version(s), "
               f"{report.memory_pins_copied} pin(s) copied")
    if report.vectors_to_rebuild:
        click.echo(f"semantic search: {report.vectors_to_rebuild} message vector(s) not copied; "
                   "the background indexer embeds the copied messages again, or run "
                   "'hermes-core sessions reindex' there to do it now")
    click.echo(f"skills: {len(report.skills_copied)} copied"
               + (f"; left as they are (the database holds other text under these names): "
                  f"{', '.join(report.skills_kept)}" if report.skills_kept else ""))
    if not into_db:
        click.echo("Now unset storage.url (and HERMES_CORE_STORAGE_URL) to use the files.")
        return
    click.echo(f"lossless archive: {report.lossless_spans_copied} span(s) of "
               f"{report.lossless_conversations_copied} conversation(s) copied"
               + (f", {report.lossless_spans_renumbered} with a new id"
                  if report.lossless_spans_renumbered else "")
               + (f"; {report.lossless_conversations_kept} already there"
                  if report.lossless_conversations_kept else ""))
    if report.lossless_vectors_to_rebuild:
        click.echo(f"lossless archive: {report.lossless_vectors_to_rebuild} message vector(s) "
                   "not copied; the engine's background indexer embeds the copied messages "
                   "again there")
    click.echo("Now set storage.url (or HERMES_CORE_STORAGE_URL) to use the database.")


def _migrate_sessions(url: Any, report: Any, quiet: bool, into_db: bool) -> None:
    from ..config import load_config, validate_section
    from ..paths import home_dir
    from ..plugins.memory.session_archive import SessionArchive, SessionArchiveConfig, archive_path
    from ..plugins.memory.session_archive.pg_store import PgSessionArchive
    from ..plugins.memory.session_archive.transfer import export_lines, import_jsonl
    from ..storage.transfer import copy_sessions

    settings = validate_section(load_config(), "session_archive", SessionArchiveConfig,
                                plugin="session_archive")
    database = PgSessionArchive(url)
    path = archive_path(settings, home_dir())
    if into_db and not path.exists():
        return
    with SessionArchive(path, background_checkpoints=False) as files:
        source, target = (files, database) if into_db else (database, files)
        _with_progress(quiet, lambda progress: copy_sessions(
            source, target, export_lines=export_lines, import_jsonl=import_jsonl,
            report=report, progress=progress))


def _migrate_memory(url: Any, report: Any, into_db: bool) -> None:
    from ..config import load_config, validate_section
    from ..paths import home_dir
    from ..plugins.memory.file_memory import FileMemoryConfig, MemoryStore
    from ..plugins.memory.file_memory.backend import memory_dir
    from ..plugins.memory.file_memory.pg_store import PgMemoryStore, database_owners
    from ..plugins.memory.file_memory.transfer import MemoryCopy, copy_owner, owners_of

    settings = validate_section(load_config(), "file_memory", FileMemoryConfig,
                                plugin="file_memory")
    home = home_dir()
    out = MemoryCopy()
    limits = {"memory_limit": settings.memory_char_limit,
              "user_limit": settings.user_char_limit, "history_limit": settings.history_limit}
    # the stores are named here, not picked by storage.url: the source is always this home
    owners = owners_of(memory_dir(home)) if into_db else database_owners(url)
    for owner in owners:
        files = MemoryStore(memory_dir(home, owner or None), **limits)
        database = PgMemoryStore(url, owner=owner, **limits)
        source, target = (files, database) if into_db else (database, files)
        copy_owner(source, target, owner, out)
    report.memory_copied += out.copied
    report.memory_kept += out.kept
    report.memory_versions_copied += out.versions
    report.memory_pins_copied += out.pins


def _migrate_skills(url: Any, report: Any, into_db: bool) -> None:
    from ..config import load_config, validate_section
    from ..paths import home_dir
    from ..plugins.memory.skills import SkillLibrary, SkillsConfig
    from ..plugins.memory.skills.pg_library import PgSkillLibrary
    from ..plugins.memory.skills.transfer import copy_skills

    settings = validate_section(load_config(), "skills", SkillsConfig, plugin="skills")
    files = SkillLibrary(home_dir() / "skills", max_chars=settings.max_chars)
    if into_db and not files.directory.is_dir():
        return
    database = PgSkillLibrary(url, max_chars=settings.max_chars)
    copied, kept = copy_skills(files, database) if into_db else copy_skills(database, files)
    report.skills_copied += copied
    report.skills_kept += kept


def _migrate_lossless(url: Any, report: Any, into_db: bool) -> None:
    from ..config import load_config, validate_section
    from ..paths import home_dir
    from ..plugins.context_engine.lossless import LosslessConfig, SpanStore
    from ..plugins.context_engine.lossless.pg_store import PgSpanStore
    from ..plugins.context_engine.lossless.transfer import copy_lossless

    settings = validate_section(load_config(), "lossless", LosslessConfig, plugin="lossless")
    home = home_dir()
    path = home / (settings.db_path or "context.db")
    if into_db and not path.exists():
        return
    database = PgSpanStore(url)
    if not into_db and not database.conversations() and not database.conversation_links():
        return  # nothing to bring back: leave no empty context.db behind
    files = SpanStore(path)
    try:
        out = copy_lossless(files, database) if into_db else copy_lossless(database, files)
    finally:
        files.close()
    report.lossless_conversations_copied += out.conversations
    report.lossless_spans_copied += out.spans
    report.lossless_spans_renumbered += out.renumbered
    report.lossless_conversations_kept += out.kept
    report.lossless_vectors_to_rebuild += out.vectors


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
