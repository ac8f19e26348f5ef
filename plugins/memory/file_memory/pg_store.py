"""MEMORY.md / USER.md in a PostgreSQL database (``storage.url``): only the medium changes.

:class:`PgMemoryStore` is :class:`~.store.MemoryStore` with each document kept as one row of
``memory_documents`` (owner, target, text) instead of a file. Everything else is the file
store's own code: validation and the threat scan (ops.py), the ``§`` format and the budgets
(entries.py), the frozen snapshot (snapshot.py), the all-or-nothing batches. A mutation locks the
row (``SELECT ... FOR UPDATE``) in place of the ``.lock`` file, re-reads it under the lock, applies
the change and writes it back in the same transaction, so no concurrent write from any node is
ever lost. ``owner`` is the user key with ``memory.scope: user`` ('' for the shared memory).

Every change is recorded as a version of the memory history (:class:`PgHistory`) in the same
transaction; rollback and forget (:mod:`.versions`) change both documents in one transaction
through the store's one write path, :meth:`~.store.MemoryStore.write_stores`; this module
supplies its medium: the DDL, the session (one transaction, the rows locked) and the commit.
A document's bytes as read (``FileState.raw``) are those its file would hold (the entries and a
final newline), so versions, rollbacks and ``memory edit`` see the same text on both backends.

:class:`PgHistory` is :class:`~.history.History` kept as rows of ``memory_versions`` instead of
lines of ``history.jsonl``; the numbering, the pruning limit, ``state_at``, ``get`` and ``redact``
(``forget``) are the file history's own rules; only the medium changes:

* a version is inserted in the *same transaction* as the store change it describes, so a version
  can never describe a write that did not happen (nothing to undo: a failed write rolls both
  back);
* the number comes from the owner's row of ``memory_history_heads``, incremented under its row
  lock, so writers on any node get distinct, increasing numbers. Lock order is fixed: the
  document rows (MEMORY then USER), then the head row, so nothing deadlocks;
* as in the file, a version leaves out its ``before`` text when it equals the previous version's
  ``after`` (kept per owner on the head row); pruning gives the first kept version of each
  store its ``before`` back.

Pins (``memory pin``) are one JSON document per owner in ``memory_pins``, changed under its row
lock; the background curator's session count and its saved proposal live in ``memory_state``.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from hermes_core.storage import StorageURL
from hermes_core.storage.component import open_component
from hermes_core.storage.dialect import PgDatabase
from hermes_core.storage.migrations import PgMigration

from .entries import canonical_text, parse_entries
from .errors import WriteFailed
from .history import History, Version, dump, newest_after, parse_versions
from .pins import parse_pins
from .store import (
    FILENAMES,
    FileState,
    MemoryStore,
    Session,
    Writer,
    check_target,
)

__all__ = ["COMPONENT", "MIGRATIONS", "PgHistory", "PgMemoryStore", "database_owners"]

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


def _stored_text(data: bytes | None) -> str:
    """What a document row holds for a file's bytes: its entries, canonically joined."""
    return canonical_text(parse_entries(data.decode("utf-8"))) if data else ""


class PgMemoryStore(MemoryStore):
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


    # ------------------------------------------- pins and the background curator's state

    def read_pins(self) -> dict[str, list[str]]:
        row = self.db.fetchone("SELECT data FROM memory_pins WHERE owner = ?", (self.owner,))
        return parse_pins(row[0] if row else None)

    def update_pins(self, change: Callable[[dict[str, list[str]]], bool]) -> None:
        """Apply ``change`` to the pins under their row lock; saved when it returns True."""
        db = self.db
        with db.transaction() as con:
            con.execute(db.sql("INSERT INTO memory_pins(owner, data) VALUES (?, '{}') "
                               "ON CONFLICT (owner) DO NOTHING"), (self.owner,))
            (data,) = db.rows(con, "SELECT data FROM memory_pins WHERE owner = ? FOR UPDATE",
                              (self.owner,))[0]
            pins = parse_pins(data)
            if change(pins):
                body = json.dumps({k: v for k, v in pins.items() if v}, ensure_ascii=False)
                con.execute(db.sql("UPDATE memory_pins SET data = ? WHERE owner = ?"),
                            (body, self.owner))

    def count_curator_session(self) -> int:
        """Count one more session end for the background curator; the new count."""
        (row,) = self.db.run(lambda con: self.db.rows(
            con, "INSERT INTO memory_state(owner, key, value) VALUES (?, 'curator_sessions', "
            "'1') ON CONFLICT (owner, key) DO UPDATE SET value = "
            "(memory_state.value::bigint + 1)::text RETURNING value", (self.owner,)))
        return int(row[0])

    def save_proposal(self, body: bytes) -> None:
        """Keep the background curator's last proposal (JSON) for ``memory curate``."""
        self.db.execute(
            "INSERT INTO memory_state(owner, key, value) VALUES (?, 'curation_proposal', ?) "
            "ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value",
            (self.owner, body.decode("utf-8")))

    def saved_proposal(self) -> str | None:
        row = self.db.fetchone("SELECT value FROM memory_state WHERE owner = ? AND "
                               "key = 'curation_proposal'", (self.owner,))
        return str(row[0]) if row else None

    def drop_proposal(self) -> None:
        """Delete the saved proposal (``forget``: it lists the entries as they were)."""
        self.db.execute("DELETE FROM memory_state WHERE owner = ? AND key = 'curation_proposal'",
                        (self.owner,))



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


class PgHistory(History):
    """The version log of one owner (the shared memory, or one user's) in PostgreSQL: the
    medium's part of :class:`~.history.History`."""

    def __init__(self, db: PgDatabase, owner: str, where: str, *, limit: int = 200) -> None:
        self.path = where  # no file: what messages show (the redacted URL and the owner)
        self.directory = where
        self.limit = max(1, int(limit))
        self.owner = owner
        self.db = db
        self._bound = threading.local()

    @contextlib.contextmanager
    def bound(self, con: Any) -> Iterator[None]:
        """Run this thread's history calls on ``con`` (the store's open transaction)."""
        previous = getattr(self._bound, "con", None)
        self._bound.con = con
        try:
            yield
        finally:
            self._bound.con = previous

    def _rows(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        """A read, in the bound transaction if there is one."""
        con = getattr(self._bound, "con", None)
        return self.db.rows(con, sql, params) if con is not None else self.db.fetch(sql, params)

    def _run(self, statement: str, params: tuple[object, ...]) -> None:
        """One statement in the bound transaction."""
        self._bound.con.execute(self.db.sql(statement), params)

    def read(self) -> list[Version]:
        rows = self._rows("SELECT data FROM memory_versions WHERE owner = ? ORDER BY version",
                          (self.owner,))
        return parse_versions(data for (data,) in rows)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The owner's head row locked: in the bound transaction, or in one of its own
        (committed when the block ends, rolled back when it raises)."""
        con = getattr(self._bound, "con", None)
        if con is not None:
            self._head()
            yield
            return
        with self.db.transaction() as con, self.bound(con):
            self._head()
            yield

    def _held(self) -> contextlib.AbstractContextManager[None]:
        return self.locked()

    def _tail(self) -> tuple[int, int]:
        row = self._rows("SELECT coalesce(max(version), 0), count(*) FROM memory_versions "
                         "WHERE owner = ?", (self.owner,))[0]
        return int(row[0]), int(row[1])

    def _head(self) -> tuple[int, int, dict[str, str | None]]:
        """Lock the owner's head row (made if missing): its number and newest ``after``s."""
        self._run("INSERT INTO memory_history_heads(owner, last) VALUES (?, 0) "
                  "ON CONFLICT (owner) DO NOTHING", (self.owner,))
        last, after = self._rows("SELECT last, last_after FROM memory_history_heads "
                                 "WHERE owner = ? FOR UPDATE", (self.owner,))[0]
        return int(last), 0, json.loads(after or "{}")

    def _insert(self, version: Version, count: int, last_after: dict[str, str | None]) -> int:
        """Insert the row in the bound transaction (a failed write rolls it back with it)."""
        self._run("UPDATE memory_history_heads SET last = ?, last_after = ? WHERE owner = ?",
                  (version.version, json.dumps(last_after), self.owner))
        self._run("INSERT INTO memory_versions(owner, version, time, data) VALUES (?, ?, ?, ?)",
                  (self.owner, version.version, version.time, dump(version)))
        return 0

    def _rewrite(self, versions: list[Version]) -> None:
        keep, params = self.db.any_of("version", [v.version for v in versions])
        self._run(f"DELETE FROM memory_versions WHERE owner = ? AND NOT ({keep})",
                  (self.owner, *params))
        self.db.executemany(
            self._bound.con,
            "INSERT INTO memory_versions(owner, version, time, data) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (owner, version) DO UPDATE SET data = excluded.data",
            [(self.owner, v.version, v.time, dump(v)) for v in versions])
        self._run("UPDATE memory_history_heads SET last = greatest(last, ?), last_after = ? "
                  "WHERE owner = ?", (max((v.version for v in versions), default=0),
                                      json.dumps(newest_after(versions)), self.owner))
