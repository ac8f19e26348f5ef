"""One store, two backends: what differs between a SQLite file and the ``storage.url`` database.

A store that keeps one concept (the lossless engine's spans, the skills, ...) is written once,
against a :class:`Database`, with SQL in SQLite's spelling (``?`` placeholders); the backend
part of the store is then its schema and a few statements that really differ. What the two
databases share is written the same: ``INSERT ... ON CONFLICT (...) DO UPDATE SET x =
excluded.x`` and ``DO NOTHING`` (upserts), ``RETURNING``, ``count(*)``, joins.

What differs, and how a :class:`Database` answers it:

* placeholders: the SQL is written with ``?`` (or ``:name`` with a dict of parameters);
  :class:`PgDatabase` sends ``%s`` (``%(name)s``);
* connections: :class:`SqliteDatabase` is one connection under a lock (``check_same_thread``
  off), with ``PRAGMA secure_delete`` on (what a store deletes is overwritten, whatever the
  build's default; :func:`purge_wal` truncates the ``-wal`` file after a forget);
  :class:`PgDatabase` borrows from the process's pool of the URL, its component migrated
  on open (:func:`.component.open_component`), reads retried once after a dropped connection,
  psycopg's errors turned into the store's own error with a message naming the database
  (password hidden) and saying nothing was changed;
* transactions: :meth:`Database.transaction` is ``BEGIN IMMEDIATE`` on SQLite (the file's write
  lock: writers are serialised, so ``FOR UPDATE`` and advisory locks are not needed there) and a
  transaction, with ``lock``'s transaction-level advisory lock taken first, on PostgreSQL;
  :attr:`Database.for_update` is ``" FOR UPDATE"`` or empty;
* lists: :meth:`Database.any_of` is ``col IN (?, ?, ...)`` or ``col = ANY(%s)``;
* text: :meth:`Database.text_in` / :meth:`Database.text_out` keep NUL characters (see
  :mod:`.text`); SQLite stores every string as it is;
* spellings: :meth:`Database.nocase_equals` (case-insensitive equality, as an index of either
  backend is built for it), :meth:`Database.json_text` (a key of a JSON text column, NULL for a
  malformed value), :meth:`Database.greatest` (the larger of two values);
* full-text search: :meth:`Database.word_match` builds the join, condition, rank and order of
  "every word" or "any word" over an FTS5 table (SQLite) or a ``tsvector`` column (PostgreSQL, the
  ``simple`` configuration: lower-cased words, no stemming, as FTS5's ``unicode61``).

The spelling (:class:`Spelling`, :class:`PgSpelling`) is apart from the connections, so a store
that manages its own connection (the session archive's SQLite file) speaks the same dialect.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .text import decode_text, encode_text
from .url import StorageURL, redact_url

__all__ = ["Database", "PgDatabase", "PgSpelling", "Spelling", "SqliteDatabase", "WordMatch",
           "purge_wal"]

T = TypeVar("T")
Params = Sequence[object]


@dataclass(frozen=True, slots=True)
class WordMatch:
    """A full-text condition: ``FROM ... {join} WHERE {where} ... ORDER BY {order}``;
    ``params`` come before any other parameter of the statement (join and where both precede
    the rest of the WHERE clause)."""

    join: str
    where: str
    rank: str  #: the score to select, higher is better
    #: best first, in the index's own terms (FTS5 sorts by ``bm25`` alone: no second key to
    #: compare, the cheapest order; PostgreSQL's ties are broken by ``m.id``)
    order: str
    params: tuple[object, ...]


class Spelling:
    """How SQL is spelled for SQLite (the spelling stores are written in)."""

    for_update = ""

    def sql(self, text: str) -> str:
        """``text`` (``?`` or ``:name`` placeholders) in this backend's spelling."""
        return text

    def any_of(self, column: str, values: Sequence[object]) -> tuple[str, tuple[object, ...]]:
        """``column`` is one of ``values``: (condition, its parameters)."""
        return f"{column} IN ({','.join('?' * len(values))})", tuple(values)

    def text_in(self, value: str) -> str:
        return value

    def text_out(self, value: str) -> str:
        return value

    def nocase_equals(self, column: str, value: str) -> str:
        """``column`` equals ``value`` (a placeholder) ignoring case, as the backend's index for
        it is built (SQLite: ``COLLATE NOCASE``; PostgreSQL: on ``lower(column)``)."""
        return f"{column} = {value} COLLATE NOCASE"

    def json_text(self, column: str, key: str) -> str:
        """The value of ``key`` in the JSON object stored as text in ``column``, for a key
        holding a string (other JSON types come in each backend's own form); NULL when the key
        is not there, and on SQLite when the value is not valid JSON (another tool may have
        written it; PostgreSQL refuses to read it)."""
        return f"CASE WHEN json_valid({column}) THEN json_extract({column}, '$.{key}') END"

    def greatest(self, a: str, b: str) -> str:
        """The larger of two values."""
        return f"max({a}, {b})"

    def word_match(self, words: str, terms: Sequence[str], *, every: bool) -> WordMatch:
        """Rows of the table aliased ``m`` (key ``m.id``) whose words hold every (``every``) or
        any of ``terms``. ``words``: the FTS5 table keyed by ``m.id`` (SQLite) or the
        ``tsvector`` column of ``m`` (PostgreSQL)."""
        quoted = [f'"{t}"' for t in terms]  # each term a phrase: no FTS5 syntax gets through
        return WordMatch(f"JOIN {words} ON {words}.rowid = m.id", f"{words} MATCH ?",
                         f"-bm25({words})", f"bm25({words})",
                         ((" " if every else " OR ").join(quoted),))


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@functools.lru_cache(maxsize=1024)
def _pg_sql(text: str) -> str:
    return _NAMED.sub(r"%(\1)s", text.replace("%", "%%")).replace("?", "%s")


class PgSpelling(Spelling):
    """How SQL is spelled for PostgreSQL."""

    for_update = " FOR UPDATE"

    def sql(self, text: str) -> str:
        return _pg_sql(text)

    def any_of(self, column: str, values: Sequence[object]) -> tuple[str, tuple[object, ...]]:
        return f"{column} = ANY(?)", (list(values),)

    def text_in(self, value: str) -> str:
        return encode_text(value)

    def text_out(self, value: str) -> str:
        return decode_text(value)

    def nocase_equals(self, column: str, value: str) -> str:
        return f"lower({column}) = lower({value})"

    def json_text(self, column: str, key: str) -> str:
        # values written through hermes-core are always JSON; the cast checks it
        return f"(({column})::jsonb ->> '{key}')"

    def greatest(self, a: str, b: str) -> str:
        return f"greatest({a}, {b})"

    def word_match(self, words: str, terms: Sequence[str], *, every: bool) -> WordMatch:
        query = (" && " if every else " || ").join(["plainto_tsquery('simple', ?)"] * len(terms))
        rank = f"ts_rank_cd({words}, q.query)"
        return WordMatch(f", (SELECT {query} AS query) AS q", f"{words} @@ q.query", rank,
                         f"{rank} DESC, m.id", tuple(terms))


class Database(Spelling):
    """The part of a store that depends on the backend (see the module docstring): its
    connections, in the backend's :class:`Spelling`."""

    #: where the data is, for messages (a path, or the URL with its password hidden)
    where: str

    def run(self, fn: Callable[[Any], T], *, retry: bool = False) -> T:
        """``fn(connection)``; ``retry``: safe to run again after a dropped connection."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what this object holds (a pool is the process's: closed at exit)."""

    @contextlib.contextmanager
    def transaction(self, *, lock: int | None = None) -> Iterator[Any]:
        """A connection in a transaction (committed when the block ends, rolled back when it
        raises); ``lock``: an advisory lock held until then (PostgreSQL)."""
        raise NotImplementedError
        yield  # pragma: no cover

    def fetch(self, sql: str, params: Params = (), *, binary: bool = False) -> list[Any]:
        """Every row of a read (retried once after a dropped connection)."""
        return self.run(lambda con: self.rows(con, sql, params, binary=binary), retry=True)

    def fetchone(self, sql: str, params: Params = ()) -> Any:
        rows = self.fetch(sql, params)
        return rows[0] if rows else None

    def execute(self, sql: str, params: Params = (), *, retry: bool = False) -> int:
        """One write in a transaction of its own; the rows it changed."""
        return self.run(lambda con: int(con.execute(self.sql(sql), params).rowcount or 0),
                        retry=retry)

    def rows(self, con: Any, sql: str, params: Params = (), *, binary: bool = False
             ) -> list[Any]:
        """Every row of ``sql`` on ``con`` (a connection from :meth:`run` / :meth:`transaction`)."""
        return list(con.execute(self.sql(sql), params).fetchall())

    def executemany(self, con: Any, sql: str, rows: Sequence[Params]) -> None:
        """``sql`` once per parameter row, on ``con``."""
        con.executemany(sql, rows)



def purge_wal(con: sqlite3.Connection, *, busy_ms: int) -> bool:
    """Copy the ``-wal`` file into the database and truncate it, so that the pages written before
    a forget (which still hold the forgotten text) leave the disk's files; without waiting.

    Best effort: it does not complete while another connection reads an older snapshot or
    writes (the next checkpoint, or closing the store, truncates it then); True if it did.
    ``busy_ms`` is the connection's busy timeout, set back after.
    """
    try:
        con.execute("PRAGMA busy_timeout = 0")
        try:
            busy = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            con.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
    except sqlite3.Error:
        return False
    return busy is not None and int(busy[0]) == 0


class SqliteDatabase(Database):
    """One SQLite file: one connection shared by threads under a lock, WAL journal."""

    def __init__(self, path: Path, *, schema: str = "", wal: bool = True) -> None:
        self.path = path
        self.where = str(path)
        self.lock = threading.Lock()
        self.con = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self.con.execute("PRAGMA secure_delete = ON")  # a forgotten row leaves no bytes behind
        if wal:
            self.con.execute("PRAGMA journal_mode=WAL")
            self.con.execute("PRAGMA synchronous=NORMAL")
        self.con.execute("PRAGMA busy_timeout=5000")
        if schema:
            self.con.executescript(schema)

    def close(self) -> None:
        with self.lock:
            self.con.close()

    def purge_wal(self) -> bool:
        """:func:`purge_wal` on this file's connection (after a forget; best effort)."""
        with self.lock:
            return purge_wal(self.con, busy_ms=5000)

    def run(self, fn: Callable[[Any], T], *, retry: bool = False) -> T:
        with self.lock:
            return fn(self.con)

    @contextlib.contextmanager
    def transaction(self, *, lock: int | None = None) -> Iterator[Any]:
        with self.lock:
            self.con.execute("BEGIN IMMEDIATE")
            try:
                yield self.con
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")


class PgDatabase(PgSpelling, Database):
    """A component of the ``storage.url`` database, on the process's pool for that URL.

    ``error(message)`` makes the store's own exception; ``what`` names the store in the message
    of a refused request (``"{what} in {url} refused the request: {reason}; nothing was
    changed"``)."""

    def __init__(self, url: StorageURL, component: str, migrations: Sequence[Any], *,
                 error: Callable[[str], Exception], what: str) -> None:
        from .component import open_component
        from .pool import import_psycopg

        self.url = url
        self.where = url.redacted
        self._error = error
        self._what = what
        self._psycopg = import_psycopg()
        self.pool: Any = open_component(url, component, migrations)

    def run(self, fn: Callable[[Any], T], *, retry: bool = False) -> T:
        from .component import run_on

        try:
            return run_on(self.pool, fn, retry=retry)
        except self._psycopg.OperationalError as exc:
            raise self.unreachable(exc) from None
        except self._psycopg.Error as exc:
            raise self.refused(exc) from None

    def unreachable(self, exc: Exception) -> Exception:
        """What a lost or failed connection raises (a store may raise another error)."""
        from .pool import connect_error

        return self._error(str(connect_error(self.url, exc)))

    def refused(self, exc: Exception) -> Exception:
        """What a statement the server refused raises (a store may let one through as it is,
        for its caller to handle)."""
        return self._error(f"{self._what} in {self.url.redacted} refused the request: "
                           f"{redact_url(str(exc)).strip()}; nothing was changed")

    @contextlib.contextmanager
    def transaction(self, *, lock: int | None = None) -> Iterator[Any]:
        # a generator cannot go through run(): the errors are mapped here, the same way
        try:
            with self.pool.connection() as con, con.transaction():
                if lock is not None:
                    con.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
                yield con
        except self._psycopg.OperationalError as exc:
            with contextlib.suppress(Exception):
                self.pool.check()
            raise self.unreachable(exc) from None
        except self._psycopg.Error as exc:
            raise self.refused(exc) from None

    def rows(self, con: Any, sql: str, params: Params = (), *, binary: bool = False
             ) -> list[Any]:
        # binary results: a bytea arrives as bytes, not as hex text to decode
        with con.cursor(binary=binary) as cur:
            return list(cur.execute(self.sql(sql), params).fetchall())

    def executemany(self, con: Any, sql: str, rows: Sequence[Params]) -> None:
        with con.cursor() as cur:  # psycopg pipelines the rows: one round trip
            cur.executemany(self.sql(sql), rows)
