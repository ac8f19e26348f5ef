"""The forgets still in reach of turns in flight: what a late archive write must re-apply.

A turn reads its history, calls the model, then archives the answer. A ``forget`` (another
process, another node) can run in between: it deletes what is stored, but the answer archived
after it may still mention the subject. So ``forget`` notes itself in a short log *before* it
deletes anything and marks the note done once every provider has deleted; a store that writes a
conversation's messages checks, after each write, the notes newer than the point its
conversation was loaded at (:meth:`ErasureLog.settled`) and re-applies them to what it wrote.

The log never holds the subject: a note keeps the SHA-256 of the subject as forget matches it
(runs of whitespace squashed, case folded) and its length, so the text just written can be
checked window by window, and the matching window (the subject, in the writer's hands anyway)
is what is forgotten again. Notes are kept for :data:`RETAIN_SECONDS` (long enough for any turn
in flight); a short subject can be guessed from its digest, so nothing is kept longer.

Kept in ``erasures.db`` in the home (table ``erasure_log``), or in the ``storage.url`` database
(component ``erasures``, beside the erasure generation).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..private import private_sqlite
from .url import StorageURL

__all__ = ["COMPONENT", "LOG_MIGRATION", "MIGRATIONS", "RETAIN_SECONDS", "ErasureLog", "ErasureNote",
           "squash", "strings", "subject_digest"]

#: seconds a note is kept (a turn in flight ends well within it)
RETAIN_SECONDS = 3600.0
_SQLITE_TABLE = """CREATE TABLE IF NOT EXISTS erasure_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    what TEXT NOT NULL, scope TEXT NOT NULL, digest TEXT NOT NULL, length INTEGER NOT NULL,
    recorded_at DOUBLE PRECISION NOT NULL, done INTEGER NOT NULL DEFAULT 0
)"""
_PG_TABLE = """CREATE TABLE erasure_log (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    what TEXT NOT NULL, scope TEXT NOT NULL, digest TEXT NOT NULL, length INTEGER NOT NULL,
    recorded_at DOUBLE PRECISION NOT NULL, done INTEGER NOT NULL DEFAULT 0
)"""
#: the component holding the erasure generation (:mod:`.erasures`) and this log: its schema is
#: here, below both, since either may be the first to open it
COMPONENT = "erasures"
GENERATION_TABLE = """CREATE TABLE IF NOT EXISTS erasure_generation (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL,
    recorded_at DOUBLE PRECISION NOT NULL,
    what TEXT NOT NULL
)"""
GENERATION_SEED = ("INSERT INTO erasure_generation (id, generation, recorded_at, what) "
                   "VALUES (1, 0, 0, '') ON CONFLICT (id) DO NOTHING")
MIGRATIONS: list[Any] = [
    (1, "erasure_generation: a counter that every forget, rollback and session deletion raises",
     [GENERATION_TABLE.replace("IF NOT EXISTS ", ""), GENERATION_SEED]),
    (2, "erasure_log: the forgets turns in flight must re-apply (digests, not text)", [_PG_TABLE]),
]
#: the PostgreSQL migration of component ``erasures`` that adds the log
LOG_MIGRATION = MIGRATIONS[1]
_SETTLED = ("SELECT coalesce((SELECT min(id) - 1 FROM erasure_log WHERE done = 0), "
            "(SELECT max(id) FROM erasure_log), 0)")
_SINCE = "SELECT id, what, scope, digest, length FROM erasure_log WHERE id > {p} ORDER BY id"


def squash(text: str) -> str:
    """Text as forget matches it: runs of whitespace as one space, case folded."""
    return " ".join(text.split()).casefold()


def strings(value: Any) -> list[str]:
    """Every string in ``value`` (dicts and lists of them: a tool call's arguments, a parsed JSON
    text): what forget matches in structured data, the text as written, not its JSON escapes (a
    line break is whitespace to forget, a backslash or a quote is itself)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return out


def subject_digest(subject: str) -> tuple[str, int]:
    """The digest and length of ``subject`` as forget matches it."""
    needle = squash(subject)
    return hashlib.sha256(needle.encode("utf-8")).hexdigest(), len(needle)


@dataclass(frozen=True, slots=True)
class ErasureNote:
    """One forget in the log (never its subject)."""

    id: int
    what: str
    #: ``all`` or ``user:<key>``, as the forget hook takes it
    scope: str
    digest: str
    length: int

    def find_in(self, *texts: str) -> str | None:
        """The subject, when one of ``texts`` mentions it (as forget matches), else None."""
        for text in texts:
            hay = squash(text)
            for start in range(0, len(hay) - self.length + 1):
                window = hay[start:start + self.length]
                if hashlib.sha256(window.encode("utf-8")).hexdigest() == self.digest:
                    return window
        return None


class ErasureLog:
    """The log of one home (``erasures.db``) or one ``storage.url`` database; thread-safe."""

    def __init__(self, home: Path, url: StorageURL | None = None,
                 sqlite_file: str = "erasures.db") -> None:
        self.url = url
        self.path = Path(home) / sqlite_file
        self._lock = threading.Lock()
        self._con: sqlite3.Connection | None = None

    # -------------------------------------------------------------------------------- write

    def note(self, what: str, subject: str, scope: str) -> int:
        """Note a forget about to run; returns the note's id (for :meth:`done`). Notes older
        than :data:`RETAIN_SECONDS` are dropped on the way."""
        digest, length = subject_digest(subject)
        now = time.time()
        row = (what, scope, digest, length, now)
        if self.url is not None:
            def insert(con: Any) -> int:
                con.execute("DELETE FROM erasure_log WHERE recorded_at < %s",
                            (now - RETAIN_SECONDS,))
                got = con.execute("INSERT INTO erasure_log (what, scope, digest, length, "
                                  "recorded_at) VALUES (%s, %s, %s, %s, %s) RETURNING id",
                                  row).fetchone()
                return int(got[0])

            return int(self._pg(insert, retry=False))
        con = self._writer()
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("DELETE FROM erasure_log WHERE recorded_at < ?", (now - RETAIN_SECONDS,))
            cur = con.execute("INSERT INTO erasure_log (what, scope, digest, length, recorded_at)"
                              " VALUES (?, ?, ?, ?, ?)", row)
            con.execute("COMMIT")
            return int(cur.lastrowid or 0)
        finally:
            con.close()

    def done(self, note_id: int) -> None:
        """The noted forget finished (every provider deleted what it holds)."""
        if self.url is not None:
            self._pg(lambda con: con.execute("UPDATE erasure_log SET done = 1 WHERE id = %s",
                                             (note_id,)), retry=False)
            return
        con = self._writer()
        try:
            con.execute("UPDATE erasure_log SET done = 1 WHERE id = ?", (note_id,))
        finally:
            con.close()

    def _writer(self) -> sqlite3.Connection:
        private_sqlite(self.path)
        con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        con.execute(_SQLITE_TABLE)
        return con

    # --------------------------------------------------------------------------------- read

    def settled(self) -> int:
        """The mark below which every noted forget is done: a conversation loaded now holds
        nothing a note up to it erased. 0 when nothing was noted."""
        rows = self._read(_SETTLED, ())
        return int(rows[0][0]) if rows else 0

    def stalled(self, before: float) -> int:
        """How many forgets noted before ``before`` (a time.time()) never finished."""
        p = "%s" if self.url is not None else "?"
        rows = self._read(f"SELECT count(*) FROM erasure_log WHERE done = 0 AND recorded_at < {p}",
                          (before,))
        return int(rows[0][0]) if rows else 0

    def since(self, mark: int) -> list[ErasureNote]:
        """The notes after ``mark`` (oldest first)."""
        p = "%s" if self.url is not None else "?"
        return [ErasureNote(int(i), str(w), str(s), str(d), int(n))
                for i, w, s, d, n in self._read(_SINCE.format(p=p), (mark,))]

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        if self.url is not None:
            return list(self._pg(lambda con: con.execute(sql, args).fetchall(), retry=True))
        with self._lock:
            if self._con is None:
                if not self.path.exists():
                    return []  # nothing noted yet; reading creates nothing
                self._con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                            check_same_thread=False, timeout=5.0)
            try:
                return self._con.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return []  # an erasures.db from before the log
                raise

    def _pg(self, fn: Any, *, retry: bool) -> Any:
        from .component import open_component, run_on

        assert self.url is not None
        return run_on(open_component(self.url, COMPONENT, MIGRATIONS), fn, retry=retry)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
