"""``hermes-core storage``: where the stores keep their data, and moving it.

``storage show`` prints the backend in effect (the URL with its password hidden) and the schema
versions; ``storage migrate --to URL`` calls the ``copy_storage`` hook once: every loaded plugin
copies its own stores from this home's files into the PostgreSQL database (the built-ins: the
session archive, the curated memory with its history and pins, skills, the lossless engine's
archive), with a progress bar per task; ``--from URL`` is the way back. The kernel names no
store: a third-party plugin's store takes part exactly like a built-in one. Then set
``storage.url`` (or ``HERMES_CORE_STORAGE_URL``) to that URL. See docs/storage.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ._common import echo_json, load_host, progress_bars, warn

if TYPE_CHECKING:
    from ..hooks import HookOutcome
    from ..host import PluginHost
    from ..storage.url import StorageURL

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
    from ..storage.migrations import foreign_tables, schema_versions

    url = resolve_storage_url(load_config().core.storage.url)
    if url is None:
        out: dict[str, Any] = {"backend": "sqlite", "home": str(home_dir())}
    else:
        pool: Any = get_pool(url)
        with pool.connection() as con:
            versions = schema_versions(con)
            foreign = foreign_tables(con)
        close_pools()
        out = {"backend": "postgresql", "url": url.redacted, "schema": versions,
               "foreign_tables": foreign}
    if as_json:
        echo_json(out)
    elif url is None:
        click.echo(f"SQLite files in {out['home']} (storage.url is not set)")
    else:
        click.echo(f"PostgreSQL at {out['url']}")
        for component, version in sorted(out["schema"].items()):
            click.echo(f"  {component}: schema {version}")
        if foreign:
            warn(f"this database holds tables that are not hermes-core's "
                 f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}) and no "
                 "hermes-core schema: every store refuses it. Point storage.url at an empty "
                 "database of its own (createdb hermes)")


@storage.command("migrate")
@click.option("--to", "to_url", metavar="URL",
              help="The PostgreSQL database to copy this home's data into.")
@click.option("--from", "from_url", metavar="URL",
              help="The way back: copy the database's data into this home's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def migrate(to_url: str | None, from_url: str | None, as_json: bool) -> None:
    """Copy every plugin's stores (sessions, curated memory with its history and pins, skills,
    the lossless engine's archive, and any third-party plugin's) from this home into the
    database at URL (--to), or back (--from).

    Safe to run again: what is already there is skipped or kept, never overwritten.
    """
    from ..storage.transfer import merge_reports

    url = _migration_url(to_url, from_url)
    into_db = to_url is not None
    host, outcomes = _copy_stores(url, into_db, as_json)
    report = merge_reports(outcomes)
    # a plugin that could not be loaded copied nothing: say so, its store may be left behind
    report["not_loaded"] = [{"plugin": r.name, "error": r.error}
                            for r in host.records.values() if r.enabled and r.error]
    failed = report["errors"]
    if as_json:
        echo_json({("to" if into_db else "from"): url.redacted, **report})
    else:
        _echo_copied(report, url, into_db)
    for record in report["not_loaded"]:
        warn(f"plugin {record['plugin']!r} could not be loaded ({record['error']}); if it keeps "
             "a store, that store was not copied: fix the plugin ('hermes-core plugins list' "
             "shows the error), then run the same command again")
    for problem in failed:
        click.echo(click.style("error: ", fg="red") + problem["message"], err=True)
    if failed:
        raise SystemExit(1)
    if not as_json:
        click.echo("Now set storage.url (or HERMES_CORE_STORAGE_URL) to use the database."
                   if into_db else
                   "Now unset storage.url (and HERMES_CORE_STORAGE_URL) to use the files.")


def _migration_url(to_url: str | None, from_url: str | None) -> StorageURL:
    """The database URL of exactly one of ``--to`` / ``--from``, validated."""
    from ..errors import HermesCoreError
    from ..storage import parse_storage_url

    if (to_url is None) == (from_url is None):
        raise click.UsageError("give exactly one of --to URL (this home into the database) or "
                               "--from URL (the database into this home)")
    hint = "--to" if to_url is not None else "--from"
    try:
        return parse_storage_url(to_url or from_url or "")
    except HermesCoreError as exc:
        raise click.BadParameter(str(exc), param_hint=hint) from None


def _copy_stores(url: StorageURL, into_db: bool, as_json: bool
                 ) -> tuple[PluginHost, list[HookOutcome]]:
    """Call ``copy_storage`` once (files into the database, or back), with progress bars."""
    from ..paths import home_dir
    from ..storage import close_pools, get_pool
    from ..storage.transfer import StorageSide

    try:
        # first, and before anything is written: one clear error for an unreachable database
        pool: Any = get_pool(url)
        with pool.connection():
            pass
        host = load_host()
        files = StorageSide(home=home_dir(), config=host.config)
        database = StorageSide(home=files.home, config=host.config, url=url)
        source, target = (files, database) if into_db else (database, files)
        try:
            with progress_bars(host, as_json) as progress:
                outcomes = host.hooks.copy_storage(source=source, target=target,
                                                   progress=progress)
        finally:
            host.hooks.close()
    finally:
        close_pools()
    return host, outcomes


def _echo_copied(report: dict[str, Any], url: StorageURL, into_db: bool) -> None:
    where = f"into {url.redacted}" if into_db else f"from {url.redacted} into this home"
    click.echo(f"copied {where}:")
    for plugin, part in report["plugins"].items():
        click.echo(f"{plugin}:")
        for line in part["lines"] or [_counts_line(part)]:
            click.echo(f"  {line}")


def _counts_line(part: dict[str, Any]) -> str:
    copied = ", ".join(f"{n} {kind}" for kind, n in part["copied"].items()) or "nothing"
    skipped = ", ".join(f"{n} {kind}" for kind, n in part["skipped"].items() if n)
    return f"copied {copied}" + (f"; already there: {skipped}" if skipped else "")
