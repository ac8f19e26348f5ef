"""Versioned, forward-only schema migrations in a PostgreSQL database, per component.

Every store that keeps data in the database (the session archive, the curated memory, ...) is a
*component* with an ordered list of migrations. ``hermes_schema`` records each component's
version. Opening a store runs :func:`migrate`, which, under a transaction-level advisory lock
(so two nodes starting at once migrate once):

* refuses a database that holds other tables but no ``hermes_schema`` (a foreign database);
* refuses a component whose recorded version is newer than this code knows;
* refuses, as foreign, a migration that meets a table of its name made by something else;
* applies the newer migrations, each in the same transaction as its version bump.

Never edit a released migration: add a new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from .errors import StorageForeignError, StorageVersionError
from .url import StorageURL

__all__ = ["MIGRATION_LOCK", "PgMigration", "foreign_tables", "migrate", "schema_versions"]

#: advisory lock key serialising migrations across processes ("HCMG")
MIGRATION_LOCK = 0x48434D47
#: (version, description, SQL statements or a function of the connection)
PgMigration = tuple[int, str, Sequence[str] | Callable[[Any], None]]

_SCHEMA_TABLE = """CREATE TABLE IF NOT EXISTS hermes_schema (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    history TEXT NOT NULL DEFAULT ''
)"""


def _tables(con: Any) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
    ).fetchall()
    return [r[0] for r in rows]


def foreign_tables(con: Any) -> list[str]:
    """The tables of a database that holds no ``hermes_schema`` (one every store refuses);
    [] for an empty database or a hermes-core one."""
    tables = _tables(con)
    return [] if "hermes_schema" in tables else sorted(tables)


def _is_schema_clash(exc: BaseException) -> bool:
    """A migration statement met a table of our name made by something else (a table that
    already exists, a column or type that does not match), not a lost connection."""
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is what runs the migration
        return False
    return isinstance(exc, psycopg.ProgrammingError | psycopg.DataError)


def schema_versions(con: Any) -> dict[str, int]:
    """The version of each component in the database ({} for an empty one)."""
    if "hermes_schema" not in _tables(con):
        return {}
    return {r[0]: int(r[1]) for r in con.execute("SELECT component, version FROM hermes_schema")}


def migrate(
    con: Any, url: StorageURL, component: str, migrations: Sequence[PgMigration],
) -> list[int]:
    """Bring ``component`` up to its newest migration; return the versions applied.

    ``con`` is a psycopg connection; the whole run is one transaction.
    A database with tables but no ``hermes_schema`` was made by something else: refused.
    """
    latest = migrations[-1][0]
    applied: list[int] = []
    with con.transaction():
        con.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        tables = _tables(con)
        if "hermes_schema" not in tables:
            foreign = tables
            if foreign:
                raise StorageForeignError(
                    f"the database {url.redacted} already holds tables that are not "
                    f"hermes-core's ({', '.join(sorted(foreign)[:5])}"
                    f"{', ...' if len(foreign) > 5 else ''}); nothing was changed. Point "
                    "storage.url at an empty database (createdb hermes) of its own")
            con.execute(_SCHEMA_TABLE)
        row = con.execute("SELECT version FROM hermes_schema WHERE component = %s",
                          (component,)).fetchone()
        current = int(row[0]) if row else 0
        if current > latest:
            raise StorageVersionError(
                f"the {component} schema in {url.redacted} is version {current}, newer than "
                f"this hermes-core knows ({latest}); upgrade hermes-core on this node (the data "
                "was left untouched)")
        history = ""
        for version, description, step in migrations:
            if version <= current:
                continue
            try:
                if callable(step):
                    step(con)
                else:
                    for statement in step:
                        con.execute(statement)
            except Exception as exc:
                if _is_schema_clash(exc):
                    raise StorageForeignError(
                        f"the {component} schema in {url.redacted} cannot be brought to "
                        f"version {version} ({description}): {str(exc).strip()}; a table of "
                        "that name that is not hermes-core's? Nothing was changed (the "
                        "migration is one transaction). Point storage.url at an empty database "
                        "of its own, or drop or rename that table") from None
                raise
            applied.append(version)
            history += f"{version} {time.time():.3f} {description}\n"
        if applied:
            con.execute(
                "INSERT INTO hermes_schema(component, version, updated_at, history) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (component) DO UPDATE SET "
                "version = excluded.version, updated_at = excluded.updated_at, "
                "history = hermes_schema.history || excluded.history",
                (component, applied[-1], time.time(), history))
    return applied
