"""The archive's database when ``storage.url`` is PostgreSQL: the same small surface as db.py.

:class:`PgDatabase` is the kernel's :class:`hermes_core.storage.dialect.PgDatabase` (the pool
of the URL, the component migrated on open, dropped connections retried, errors named) with
what the archive's code calls on :class:`.db.Database` (``read``, ``write``, ``write_one``,
``insert_many``, ``retried``, ``lock``, ``close``). The archive's SQL is written once, in
SQLite's spelling, with the kernel dialect's words where the backends differ
(``nocase_equals``, ``json_text``, ``greatest``); the dialect sends its placeholders as
psycopg's. What is the archive's own: an
INSERT of a session, message or fact gets ``RETURNING`` so ``lastrowid`` works as with sqlite3;
the condition of a searchable message (``schema.INDEXED_SQL``, which its SQLite triggers use
too) is sent in PostgreSQL's spelling; and a unique violation (two nodes creating one session)
reaches the archive as it is, to retry (``retried``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hermes_core.storage import StorageURL, dialect
from hermes_core.storage.pool import connect_error
from hermes_core.storage.text import decode_text, encode_text

from .errors import ArchiveError
from .pg_schema import COMPONENT, MIGRATIONS
from .schema import INDEXED_SQL

__all__ = ["PgDatabase", "to_pg"]

T = TypeVar("T")

_RETURNING = {"INSERT INTO sessions": " RETURNING num", "INSERT INTO messages": " RETURNING id",
              "INSERT INTO facts(": " RETURNING id"}
_PG = dialect.PgSpelling()
#: whether a message is searchable (schema.INDEXED_SQL, the condition its SQLite triggers use)
#: in PostgreSQL's spelling
_INDEXED = f"(m.meta IS NULL OR {_PG.json_text('m.meta', 'carried_over')} IS NULL)"


@functools.lru_cache(maxsize=512)
def to_pg(sql: str) -> str:
    """The archive's statement in PostgreSQL's spelling (an insert returning its key)."""
    out = _PG.sql(sql.replace(INDEXED_SQL, _INDEXED))
    stripped = out.lstrip()
    for head, returning in _RETURNING.items():
        if stripped.startswith(head) and "RETURNING" not in out:
            return out + returning
    return out


# PostgreSQL text cannot hold NUL; SQLite's can (hermes_core.storage.text keeps it)
def _enc(value: Any) -> Any:
    return encode_text(value) if isinstance(value, str) else value


def _dec(value: Any) -> Any:
    return decode_text(value) if isinstance(value, str) else value


def _row(row: Any) -> Any:
    return None if row is None else tuple(_dec(v) for v in row)


def _params(params: Any) -> Any:
    if isinstance(params, dict):
        # LIMIT -1 means "no limit" in SQLite (the archive's spelling); PostgreSQL takes NULL
        return {k: (None if k == "limit" and v == -1 else _enc(v)) for k, v in params.items()}
    return tuple(_enc(v) for v in params)


class _Cursor:
    def __init__(self, cur: Any, returning: bool) -> None:
        self._cur = cur
        self.lastrowid: int | None = None
        if returning:
            row = cur.fetchone()
            self.lastrowid = int(row[0]) if row else None

    def fetchone(self) -> Any:
        return _row(self._cur.fetchone())

    def fetchall(self) -> list[Any]:
        return [_row(r) for r in self._cur.fetchall()]


class _Con:
    """A psycopg connection that takes the archive's SQLite-dialect statements."""

    def __init__(self, con: Any) -> None:
        self.raw = con

    def execute(self, sql: str, params: Any = ()) -> _Cursor:
        pg = to_pg(sql)
        cur = self.raw.execute(pg, _params(params))
        return _Cursor(cur, pg.endswith((" RETURNING num", " RETURNING id")))

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        with self.raw.cursor() as cur:
            cur.executemany(to_pg(sql).replace(" RETURNING id", ""), [_params(r) for r in rows])


class PgDatabase(dialect.PgDatabase):
    """The archive's tables in one PostgreSQL database (migrated on open)."""

    backend = "postgresql"

    def __init__(self, url: StorageURL) -> None:
        super().__init__(url, COMPONENT, MIGRATIONS, error=ArchiveError,
                         what="the session archive")
        #: what messages name as "where": the URL with its password hidden
        self.path = url.redacted
        self.lock = threading.RLock()
        self.retried = (self._psycopg.errors.UniqueViolation,)

    def unreachable(self, exc: Exception) -> Exception:
        return connect_error(self.url, exc)

    def refused(self, exc: Exception) -> Exception:
        unique: type[Exception] = self._psycopg.errors.UniqueViolation
        if isinstance(exc, unique):
            return exc  # the archive retries these (two nodes creating one session)
        return super().refused(exc)

    def write(self, tx: Callable[[Any], T]) -> T:
        """Run ``tx(con)`` in one transaction. A unique violation (another node created the same
        session at the same moment) is raised as it is, for the archive to retry."""
        def run(con: Any) -> T:
            with con.transaction():
                return tx(_Con(con))

        return self.run(run)

    def insert_many(self, con: _Con, sql: str, rows: Sequence[Any]) -> list[int]:
        """Run one INSERT per row on ``con``, pipelined (psycopg sends them all before reading
        any answer: one round trip, not one per row); return the new rows' ids in order."""
        if not rows:
            return []
        pg = to_pg(sql)
        if not pg.endswith(" RETURNING id"):
            raise ValueError("insert_many takes an INSERT INTO messages statement")
        ids: list[int] = []
        with con.raw.cursor() as cur:
            cur.executemany(pg, [_params(r) for r in rows], returning=True)
            while True:
                row = cur.fetchone()
                if row is not None:
                    ids.append(int(row[0]))
                if not cur.nextset():
                    break
        return ids

    def write_one(self, sql: str, params: Any = ()) -> int:
        """One statement, committed on its own (autocommit: one round trip); the new row's id
        for an INSERT."""
        return self.run(lambda con: int(_Con(con).execute(sql, params).lastrowid or 0))

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """One query (a single statement sees one snapshot; autocommit: one round trip)."""
        return self.run(lambda con: _Con(con).execute(sql, params).fetchall(), retry=True)

    def read_many(self, statements: Sequence[tuple[str, Any]]) -> list[list[Any]]:
        """Several queries sent at once and answered in one round trip (psycopg's pipeline
        mode); each sees its own snapshot, as separate :meth:`read` calls would."""
        def run(con: Any) -> list[list[Any]]:
            with con.pipeline():
                cursors = [_Con(con).execute(sql, params) for sql, params in statements]
            return [cur.fetchall() for cur in cursors]

        return self.run(run, retry=True)

    def read_with(self, settings: dict[str, str], sql: str, params: Any = ()) -> list[Any]:
        """One query with planner settings that hold for it alone (``SET LOCAL`` in a
        transaction of its own), e.g. ``{"jit": "off"}``. The transaction, the settings and
        the query are sent at once (pipeline mode): one round trip, not one per statement."""
        def run(con: Any) -> list[Any]:
            with con.pipeline(), con.transaction():
                for name, value in settings.items():
                    con.execute("SELECT set_config(%s, %s, true)", (name, value))
                cur = _Con(con).execute(sql, params)
            return cur.fetchall()

        return self.run(run)
