"""The archive's database when ``storage.url`` is PostgreSQL: the same small surface as db.py.

:class:`PgDatabase` offers what the archive's code calls on :class:`.db.Database` (``read``,
``write``, ``write_one``, ``lock``, ``close``) over a psycopg connection pool. The archive's SQL
is written once, in SQLite's dialect; :func:`to_pg` rewrites the few spellings that differ
(placeholders, ``COLLATE NOCASE``, ``json_extract``, two-argument ``max``) so the same queries
run on both backends. Inserts get ``RETURNING`` so ``lastrowid`` works as with sqlite3.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hermes_core.storage import StorageURL, redact_url
from hermes_core.storage.component import open_component, run_on
from hermes_core.storage.pool import connect_error, import_psycopg
from hermes_core.storage.text import decode_text, encode_text

from .errors import ArchiveError
from .pg_schema import COMPONENT, MIGRATIONS

__all__ = ["PgDatabase", "to_pg"]

T = TypeVar("T")

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_NOCASE = re.compile(r"(\w+(?:\.\w+)?) = (:\w+|\?) COLLATE NOCASE")
_JSON_VALID = re.compile(r"CASE WHEN json_valid\((\w+)\) THEN (json_extract\(\1, '[^']*'\)) END")
_JSON_EXTRACT = re.compile(r"json_extract\((\w+(?:\.\w+)?), '\$\.(\w+)'\)")
_MAX2 = re.compile(r"\bmax\((\w+), ")
# DISTINCT with an ORDER BY on another column (the title lookup): newest use of each chain
_DISTINCT_CHAIN = re.compile(r"SELECT DISTINCT chain FROM sessions WHERE (.*) ORDER BY updated_at "
                             r"DESC", re.S)
_RETURNING = {"INSERT INTO sessions": " RETURNING num", "INSERT INTO messages": " RETURNING id",
              "INSERT INTO facts(": " RETURNING id"}


@functools.lru_cache(maxsize=512)
def to_pg(sql: str) -> str:
    """The archive's SQLite-dialect statement in PostgreSQL's dialect."""
    out = sql.replace("%", "%%")
    out = _NOCASE.sub(r"lower(\1) = lower(\2)", out)
    # values written through the archive are always JSON; PostgreSQL checks it on the cast
    out = _JSON_VALID.sub(r"\2", out)
    out = _JSON_EXTRACT.sub(r"((\1)::jsonb ->> '\2')", out)
    out = _DISTINCT_CHAIN.sub(r"SELECT chain FROM sessions WHERE \1 GROUP BY chain "
                              r"ORDER BY max(updated_at) DESC", out)
    out = _MAX2.sub(r"greatest(\1, ", out)
    out = _NAMED.sub(r"%(\1)s", out)
    out = out.replace("?", "%s")
    stripped = out.lstrip()
    for head, returning in _RETURNING.items():
        if stripped.startswith(head) and "RETURNING" not in out:
            out += returning
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
        # LIMIT -1 means "no limit" in SQLite; PostgreSQL takes NULL
        return {k: (None if k == "limit" and v == -1 else _enc(v)) for k, v in params.items()}
    return tuple(_enc(v) for v in params)


class _Cursor:
    def __init__(self, cur: Any, returning: bool) -> None:
        self._cur = cur
        self.lastrowid: int | None = None
        self._first: Any = None
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

    def insert_many(self, sql: str, rows: Sequence[Any]) -> list[int]:
        """Run one INSERT per row, pipelined (psycopg sends them all before reading any answer:
        one round trip, not one per row); return the new rows' ids in order."""
        pg = to_pg(sql)
        if not pg.endswith(" RETURNING id"):
            raise ValueError("insert_many takes an INSERT INTO messages statement")
        ids: list[int] = []
        with self.raw.cursor() as cur:
            cur.executemany(pg, [_params(r) for r in rows], returning=True)
            while True:
                row = cur.fetchone()
                if row is not None:
                    ids.append(int(row[0]))
                if not cur.nextset():
                    break
        return ids


class PgDatabase:
    """The archive's tables in one PostgreSQL database (migrated on open)."""

    backend = "postgresql"

    def __init__(self, url: StorageURL) -> None:
        self.url = url
        #: what messages name as "where": the URL with its password hidden
        self.path = url.redacted
        self.lock = threading.RLock()
        self.psycopg = import_psycopg()
        self.pool = open_component(url, COMPONENT, MIGRATIONS)

    def _translate(self, exc: Exception) -> Exception:
        psycopg = self.psycopg
        if isinstance(exc, psycopg.OperationalError):
            return connect_error(self.url, exc)
        if isinstance(exc, psycopg.Error):
            return ArchiveError(f"the session archive in {self.path} refused the operation: "
                                f"{redact_url(str(exc)).strip()}")
        return exc

    def _run(self, fn: Callable[[Any], T], *, retry: bool = False) -> T:
        """``fn`` on a pooled connection; after a dropped connection the pool is checked (see
        :func:`~hermes_core.storage.component.run_on`) and a read (``retry``) runs once more."""
        from psycopg_pool import PoolTimeout

        try:
            return run_on(self.pool, fn, retry=retry)
        except PoolTimeout as exc:
            raise connect_error(self.url, exc) from exc
        except self.psycopg.errors.UniqueViolation:
            raise  # the archive retries these (two nodes creating one session)
        except self.psycopg.Error as exc:
            raise self._translate(exc) from exc

    def write(self, tx: Callable[[Any], T]) -> T:
        """Run ``tx(con)`` in one transaction. A unique violation (another node created the same
        session at the same moment) is raised as it is, for the archive to retry."""
        def run(con: Any) -> T:
            with con.transaction():
                return tx(_Con(con))

        return self._run(run)

    def write_one(self, sql: str, params: Any = ()) -> int:
        """One statement, committed on its own (autocommit: one round trip); the new row's id
        for an INSERT."""
        def run(con: Any) -> int:
            return int(_Con(con).execute(sql, params).lastrowid or 0)

        return self._run(run)

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """One query (a single statement sees one snapshot; autocommit: one round trip)."""
        def run(con: Any) -> list[Any]:
            return [_row(r) for r in con.execute(to_pg(sql), _params(params)).fetchall()]

        return self._run(run, retry=True)

    def read_many(self, statements: Sequence[tuple[str, Any]]) -> list[list[Any]]:
        """Several queries sent at once and answered in one round trip (psycopg's pipeline
        mode); each sees its own snapshot, as separate :meth:`read` calls would."""
        def run(con: Any) -> list[list[Any]]:
            with con.pipeline():
                cursors = [con.execute(to_pg(sql), _params(params)) for sql, params in statements]
            return [[_row(r) for r in cur.fetchall()] for cur in cursors]

        return self._run(run, retry=True)

    def read_with(self, settings: dict[str, str], sql: str, params: Any = ()) -> list[Any]:
        """One query with planner settings that hold for it alone (``SET LOCAL`` in a
        transaction of its own), e.g. ``{"jit": "off"}``. The transaction, the settings and
        the query are sent at once (pipeline mode): one round trip, not one per statement."""
        def run(con: Any) -> list[Any]:
            with con.pipeline(), con.transaction():
                for name, value in settings.items():
                    con.execute("SELECT set_config(%s, %s, true)", (name, value))
                cur = con.execute(to_pg(sql), _params(params))
            return [_row(r) for r in cur.fetchall()]

        return self._run(run)

    def close(self) -> None:
        """The pool is shared by every store of this URL in the process; it stays open."""
