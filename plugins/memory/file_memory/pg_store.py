"""MEMORY.md / USER.md in a PostgreSQL database (``storage.url``): only the medium changes.

:class:`PgMemoryStore` is :class:`~.store.MemoryStore` with each document kept as one row of
``memory_documents`` (owner, target, text) instead of a file. Everything else is the file
store's own code: validation and the threat scan (ops.py), the ``§`` format and the budgets
(entries.py), the frozen snapshot (snapshot.py), the all-or-nothing batches. A mutation locks the
row (``SELECT ... FOR UPDATE``) in place of the ``.lock`` file, re-reads it under the lock, applies
the change and writes it back in the same transaction, so no concurrent write from any node is
ever lost. ``owner`` is the user key with ``memory.scope: user`` ('' for the shared memory).

Every change is recorded as a version of the memory history (:mod:`.pg_history`) in the same
transaction; rollback and forget (:mod:`.versions`) change both documents in one transaction
through the store's one write path, :meth:`~.store.MemoryStore.write_stores`; this module
supplies its medium: the DDL, the session (one transaction, the rows locked) and the commit.
A document's bytes as read (``FileState.raw``) are those its file would hold (the entries and a
final newline), so versions, rollbacks and ``memory edit`` see the same text on both backends.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from hermes_core.storage import StorageURL
from hermes_core.storage.component import open_component
from hermes_core.storage.dialect import PgDatabase
from hermes_core.storage.migrations import PgMigration

from .entries import canonical_text, parse_entries
from .errors import WriteFailed
from .history import Version
from .pg_history import PgHistory, PgMemoryExtras
from .store import (
    FILENAMES,
    FileState,
    MemoryStore,
    Session,
    Writer,
    check_target,
)

__all__ = ["COMPONENT", "MIGRATIONS", "PgMemoryStore", "database_owners"]

COMPONENT = "file_memory"
MIGRATIONS: list[PgMigration] = [
    (1, "memory_documents: one row per owner and target", [
        """CREATE TABLE memory_documents (
            owner TEXT NOT NULL,
            target TEXT NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            version BIGINT NOT NULL DEFAULT 0,
            updated_at DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM now()),
            PRIMARY KEY (owner, target)
        )""",
    ]),
    (2, "memory history, pins and curator state", [
        """CREATE TABLE memory_versions (
            owner TEXT NOT NULL,
            version BIGINT NOT NULL,
            time DOUBLE PRECISION NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (owner, version)
        )""",
        """CREATE TABLE memory_history_heads (
            owner TEXT PRIMARY KEY,
            last BIGINT NOT NULL DEFAULT 0,
            last_after TEXT NOT NULL DEFAULT '{}'
        )""",
        """CREATE TABLE memory_pins (
            owner TEXT PRIMARY KEY,
            data TEXT NOT NULL DEFAULT '{}'
        )""",
        """CREATE TABLE memory_state (
            owner TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (owner, key)
        )""",
    ]),
]


def file_form(text: str | None) -> bytes | None:
    """The bytes the document's file would hold (``None``: no document, or an empty one)."""
    return (text + "\n").encode("utf-8") if text else None


def database_owners(url: StorageURL) -> list[str]:
    """Every owner with a document, a version or a pin in the database ('' first)."""
    pool = open_component(url, COMPONENT, MIGRATIONS)
    with pool.connection() as con:
        rows = con.execute("SELECT owner FROM memory_documents UNION SELECT owner FROM "
                           "memory_versions UNION SELECT owner FROM memory_pins "
                           "ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def _decoded(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def _stored_text(data: bytes | None) -> str:
    """What a document row holds for a file's bytes: its entries, canonically joined."""
    return canonical_text(parse_entries(data.decode("utf-8"))) if data else ""


class PgMemoryStore(PgMemoryExtras, MemoryStore):
    """The two bounded stores of one owner, in PostgreSQL, with their history and pins."""

    def __init__(
        self, url: StorageURL, *, owner: str = "", memory_limit: int = 2200,
        user_limit: int = 1375, history_limit: int = 200,
    ) -> None:
        self.url = url
        self.owner = owner
        self.limits = {"memory": memory_limit, "user": user_limit}
        # what messages and listings show as "where": never a real path, never the password
        self.directory = PurePosixPath(url.redacted.replace("/", "|")) / (owner or "_shared")  # type: ignore[assignment]
        self._swept: set[str] = set()
        # a refused statement: WriteFailed, "the memory store in URL refused the request: ..."
        self.db = PgDatabase(url, COMPONENT, MIGRATIONS, error=WriteFailed,
                             what="the memory store")
        where = f"{url.redacted} (memory history{', user ' + owner if owner else ''})"
        #: the version log (``None`` when ``history_limit`` is 0: no versions are kept)
        self.history: PgHistory | None = (  # type: ignore[assignment]
            PgHistory(self.db, owner, where, limit=history_limit) if history_limit > 0 else None)

    def path(self, target: str) -> _Where:  # type: ignore[override]
        name = FILENAMES[check_target(target)]
        where = f"{self.url.redacted} ({name}{', user ' + self.owner if self.owner else ''})"
        return _Where(where, name)

    def read(self, target: str) -> FileState:
        return self.read_many([target])[target]

    def read_many(self, targets: Iterable[str]) -> dict[str, FileState]:
        """The documents of ``targets`` in one query (a session start reads both)."""
        wanted = [check_target(t) for t in targets]
        where, params = self.db.any_of("target", wanted)
        try:
            rows = dict(self.db.fetch(f"SELECT target, text FROM memory_documents WHERE "
                                      f"owner = ? AND {where}", (self.owner, *params)))
        except WriteFailed as exc:
            # as with an unreadable file: reported in each state, never raised on a read
            return {t: FileState([], problem=exc.message) for t in wanted}
        return {t: FileState(parse_entries(rows[t]), raw=file_form(rows[t])) if t in rows
                else FileState([]) for t in wanted}

    @contextlib.contextmanager
    def _session(self, targets: tuple[str, ...]) -> Iterator[Session]:
        """One transaction: the documents' rows locked in ``targets`` order (MEMORY then
        USER: the fixed lock order), the history bound to it."""
        with self.db.transaction() as con:
            states: dict[str, FileState] = {}
            for target in targets:
                text = self._locked_text(con, target)
                states[target] = FileState(parse_entries(text), raw=file_form(text))
            history = self.history
            with history.bound(con) if history is not None else contextlib.nullcontext():
                yield Session(states, con)

    def _commit(self, session: Session, new: dict[str, bytes | None],
                build: Callable[[int], Version], *, after_write: Callable[[], None] | None,
                backup: list[Path] | None, writer: Writer) -> Version | None:
        """The version and the documents in the session's transaction: anything raised
        rolls all of it back (``backup`` and ``writer`` are the file medium's)."""
        history = self.history
        version = history.append(build)[0] if history is not None else None
        for target, data in new.items():
            self._set_text(session.con, target, _stored_text(data))
        if after_write is not None:
            after_write()
        if history is not None:
            history.prune()
        return version

    def _locked_text(self, con: Any, target: str) -> str:
        """The document's text, its row locked until the transaction ends (made if missing)."""
        con.execute(self.db.sql("INSERT INTO memory_documents(owner, target) VALUES (?, ?) "
                                "ON CONFLICT DO NOTHING"), (self.owner, target))
        (text,) = self.db.rows(con, "SELECT text FROM memory_documents WHERE owner = ? AND "
                               "target = ? FOR UPDATE", (self.owner, target))[0]
        return str(text)

    def _set_text(self, con: Any, target: str, text: str, *, when: str = "") -> int:
        """Write the document's text (``when``: a further condition); the rows changed."""
        cur = con.execute(self.db.sql(
            "UPDATE memory_documents SET text = ?, version = version + 1, updated_at = "
            f"extract(epoch FROM now()) WHERE owner = ? AND target = ?{when}"),
            (text, self.owner, target))
        return int(cur.rowcount or 0)

    def put_document(self, target: str, entries: list[str]) -> bool:
        """Write ``entries`` into ``target`` if it is empty, recording no version (``storage
        migrate``: the copied history already ends with this text); True when written."""
        target = check_target(target)
        with self.db.transaction() as con:
            self._locked_text(con, target)
            return bool(self._set_text(con, target, canonical_text(entries), when=" AND text = ''"))


class _Where:
    """Where a document lives, for messages: ``str()`` is the redacted URL and the document,
    ``.name`` the file name it stands for (MEMORY.md / USER.md)."""

    def __init__(self, where: str, name: str) -> None:
        self._where = where
        self.name = name

    def __str__(self) -> str:
        return self._where

    def __repr__(self) -> str:
        return f"<{self._where}>"

    def with_name(self, name: str) -> Path:
        """A file next to nothing: ``memory edit`` keeps a rejected edit in the temp folder."""
        return Path(tempfile.gettempdir()) / name
