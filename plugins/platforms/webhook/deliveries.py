"""Idempotent delivery: the ``webhook-id`` of a Standard Webhooks request is its idempotency key.

A client that did not get an answer (a timeout, a node killed mid-turn) sends the message again,
re-signed, with the same ``webhook-id`` and body, to this node or any other of the service. Each
id is recorded in a ``webhook_deliveries`` row, in ``webhook.db`` in the home (SQLite) or in the
``storage.url`` database (PostgreSQL, shared by every node):

* The row is claimed in the conversation's place in line, under its cross-node turn lock (the
  dispatcher's :data:`~hermes_core.dispatch.Gate`), so two nodes never run one message at once.
  A row left ``running`` when its turn ends can only belong to a node that died mid-turn: the
  retry takes it over, and the agent reuses the user message that node had already archived
  (``meta["message_id"]``) instead of storing it twice.
* A turn that succeeded stores its answer (status and JSON body) in the row; a retry gets that
  answer, marked by the ``webhook-replayed: true`` header, and nothing is stored again.
* A turn that failed gives the row up: the retry runs the turn again (reusing the stored message).
* The same id with another body is refused with 409 naming the id; a retry arriving on the node
  still running the first copy gets 202 ``in_progress`` at once.
* Rows older than ``webhook.idempotency_hours`` are deleted now and then.
* ``hermes-core forget X`` erases every kept answer that mentions X (the module's ``forget``
  hook); a retry of such a message gets 410 and runs no second turn.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hermes_core.errors import HermesCoreError
from hermes_core.private import private_sqlite
from hermes_core.storage import StorageURL, redact_url
from hermes_core.storage.component import open_component, run_on
from hermes_core.storage.erasure_log import strings
from hermes_core.storage.errors import StorageError
from hermes_core.storage.pool import import_psycopg

__all__ = ["SQLITE_FILE", "Claim", "Deliveries", "DeliveryConflict", "DeliveryStoreUnavailable"]

#: the SQLite file in the home (without ``storage.url``)
SQLITE_FILE = "webhook.db"
_SQLITE_MIGRATIONS = [
    """CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        body_sha BLOB NOT NULL,
        state TEXT NOT NULL,
        owner TEXT NOT NULL,
        status INTEGER,
        answer TEXT,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at)",
]
#: the PostgreSQL migration, appended to the webhook component's list (see :mod:`.replays`)
PG_MIGRATION: tuple[int, str, list[str]] = (
    2, "webhook_deliveries: the answer of each message id, for idempotent retries", [
        """CREATE TABLE webhook_deliveries (
            id TEXT PRIMARY KEY,
            body_sha BYTEA NOT NULL,
            state TEXT NOT NULL,
            owner TEXT NOT NULL,
            status INTEGER,
            answer TEXT,
            created_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at)",
    ])
_PRUNE_EVERY = 600.0
#: what a forgotten answer becomes
_ERASED = json.dumps({"error": "the answer to this message mentioned something forgotten since "
                      "('hermes-core forget'); it was erased. The message was answered once and "
                      "is not run again", "erased": True})


def _squash(text: str) -> str:
    return " ".join(text.split()).casefold()


def _texts(answer: str) -> list[str]:
    """The strings of a kept answer (JSON) as a reader sees them, not their JSON escapes (a line
    break is whitespace to forget, a backslash or a quote is itself); the raw text when it is
    not JSON."""
    try:
        return strings(json.loads(answer))
    except ValueError:
        return [answer]


class DeliveryConflict(HermesCoreError):
    """The id was already used for another body (409)."""


class DeliveryStoreUnavailable(HermesCoreError):
    """The delivery record could not be read or written; the message was not run (503)."""


@dataclass(frozen=True)
class Claim:
    """What claiming an id found: ``new`` (run the turn) or ``answered`` (``status``/``body``)."""

    outcome: Literal["new", "answered"]
    status: int = 0
    body: dict[str, Any] | None = None


class Deliveries:
    """The delivery records of one service (see the module docstring)."""

    def __init__(self, *, home: Path | None = None, url: StorageURL | None = None,
                 retention_hours: float = 24.0) -> None:
        if (home is None) == (url is None):
            raise ValueError("give the home (SQLite) or the storage URL (PostgreSQL)")
        self.retention = retention_hours * 3600.0
        #: this process's mark on the rows it claims (a row of another mark left running at the
        #: head of the line belongs to a process that died mid-turn)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        self.url = url
        self._path = home / SQLITE_FILE if home is not None else None
        self._con: sqlite3.Connection | None = None
        self._pool: Any = None
        self._lock = threading.Lock()
        self._busy: set[str] = set()
        self._pruned_at = 0.0
        from hermes_core.storage.erasure_log import ErasureLog

        #: forgets noted while a turn runs: its kept answer is checked against them (see answer)
        self._erasures = ErasureLog(home if home is not None else Path("."), url)
        self._marks: dict[str, int] = {}

    # ------------------------------------------------------------------------------ opening

    def exists(self) -> bool:
        """Whether there can be records (the SQLite file exists, or the database is set)."""
        return self.url is not None or (self._path is not None and self._path.exists())

    def open(self) -> None:
        """Create or upgrade the table now (a store problem stops ``serve`` at start)."""
        if self.url is not None:
            from .replays import COMPONENT, MIGRATIONS

            self._pool = open_component(self.url, COMPONENT, MIGRATIONS)
            return
        assert self._path is not None
        try:
            private_sqlite(self._path)
            con = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None,
                                  timeout=10.0)
        except (OSError, sqlite3.Error) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise DeliveryStoreUnavailable(
                f"cannot open the webhook's delivery records {self._path}: {why}. serve keeps "
                "each message's webhook-id there so that retries are answered once: make the "
                "home writable (or set webhook.idempotency_hours: 0 to keep no records)") from None
        con.execute("PRAGMA secure_delete = ON")  # an erased answer leaves no bytes behind
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        if version > 1:
            con.close()
            raise DeliveryStoreUnavailable(
                f"{self._path} was written by a newer hermes-core (schema {version}); upgrade "
                "hermes-core or move the file away")
        if version < 1:
            con.execute("BEGIN IMMEDIATE")
            for statement in _SQLITE_MIGRATIONS:
                con.execute(statement)
            con.execute("PRAGMA user_version = 1")
            con.execute("COMMIT")
        self._con = con

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
        self._erasures.close()

    # ------------------------------------------------------------------------------- access

    def _run(self, fn: Callable[[Any], Any], what: str) -> Any:
        """``fn(connection)`` on SQLite (under the lock) or PostgreSQL (a pooled connection);
        every failure becomes :class:`DeliveryStoreUnavailable` naming the store."""
        if self.url is None:
            with self._lock:
                if self._con is None:
                    raise DeliveryStoreUnavailable("the webhook's delivery records are closed")
                try:
                    return fn(self._con)
                except sqlite3.Error as exc:
                    raise DeliveryStoreUnavailable(
                        f"{what} in {self._path} failed: {exc}; the message was not run, "
                        "retry it later") from None
        psycopg = import_psycopg()
        try:
            return run_on(self._pool, fn, retry=False)
        except (psycopg.Error, StorageError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            assert self.url is not None
            raise DeliveryStoreUnavailable(
                f"{what} in the database ({self.url.redacted}) failed: {redact_url(first)}; the "
                "message was not run, retry it later") from None

    def _sql(self, statement: str) -> str:
        return statement if self.url is None else statement.replace("?", "%s")

    @contextmanager
    def in_flight(self, msg_id: str) -> Iterator[bool]:
        """Mark ``msg_id`` as being served by this process; yields False when it already is."""
        with self._lock:
            fresh = msg_id not in self._busy
            self._busy.add(msg_id)
        try:
            yield fresh
        finally:
            if fresh:
                with self._lock:
                    self._busy.discard(msg_id)

    def claim(self, msg_id: str, body_sha: bytes, now: float | None = None) -> Claim:
        """Take ``msg_id`` for a turn, or return the answer already given to it. Call it in the
        conversation's place in line only (see the module docstring)."""
        now = time.time() if now is None else now
        prune = now - self._pruned_at > _PRUNE_EVERY
        if prune:
            self._pruned_at = now
        sql = self._sql

        def run(con: Any) -> Claim:
            if prune:
                con.execute(sql("DELETE FROM webhook_deliveries WHERE created_at < ?"),
                            (now - self.retention,))
            cur = con.execute(sql(
                "INSERT INTO webhook_deliveries (id, body_sha, state, owner, created_at) "
                "VALUES (?, ?, 'running', ?, ?) ON CONFLICT (id) DO NOTHING"),
                (msg_id, body_sha, self.owner, now))
            if cur.rowcount == 1:
                return Claim("new")
            row = con.execute(sql("SELECT body_sha, state, status, answer FROM "
                                  "webhook_deliveries WHERE id = ?"), (msg_id,)).fetchone()
            if row is None:  # pruned between the two statements: a fresh claim next time
                raise DeliveryStoreUnavailable(f"the record of {msg_id!r} changed meanwhile; "
                                               "retry the message")
            if bytes(row[0]) != body_sha:
                raise DeliveryConflict(
                    f"webhook-id {msg_id!r} was already used for another message body; a retry "
                    "must send the same body, a new message needs a new webhook-id")
            if row[1] == "done":
                return Claim("answered", int(row[2]), json.loads(row[3]))
            # running, and we are at the head of the line: its node died mid-turn; take it over
            con.execute(sql("UPDATE webhook_deliveries SET owner = ? WHERE id = ?"),
                        (self.owner, msg_id))
            return Claim("new")

        try:
            mark = self._erasures.settled()  # before the turn: see answer()
        except Exception as exc:
            raise DeliveryStoreUnavailable(f"reading the erasure log failed: {exc}; the "
                                           "message was not run, retry it later") from None
        claim: Claim = self._run(run, f"recording message {msg_id!r}")
        if claim.outcome == "new":
            with self._lock:
                self._marks[msg_id] = mark
        return claim

    def answer(self, msg_id: str, status: int, body: dict[str, Any]) -> None:
        """Store the answer of a turn this process ran."""
        text = json.dumps(body, ensure_ascii=False)
        self._run(lambda con: con.execute(self._sql(
            "UPDATE webhook_deliveries SET state = 'done', status = ?, answer = ? "
            "WHERE id = ? AND owner = ?"), (status, text, msg_id, self.owner)),
            f"storing the answer to {msg_id!r}")
        with self._lock:
            mark = self._marks.pop(msg_id, None)
        if mark is None:
            return
        # a forget that ran during the turn (noted after the claim) is applied to the answer
        # kept just now, the way the forget itself treats kept answers
        for note in self._erasures.since(mark):
            # a user-scoped forget deletes no kept answer (they are not kept per user)
            subject = (note.find_in(*_texts(text))
                       if note.what == "forget" and note.scope == "all" else None)
            if subject is not None:
                self.erase_mentions(subject, dry_run=False)

    def erase_mentions(self, subject: str, *, dry_run: bool) -> list[str]:
        """The ids whose kept answer mentions ``subject`` (case and runs of whitespace ignored);
        unless ``dry_run`` their answer is erased (a retry then gets 410, and still runs no
        second turn). On SQLite the freed bytes are zeroed and the log truncated."""
        needle = _squash(subject)

        def run(con: Any) -> list[str]:
            rows = con.execute("SELECT id, answer FROM webhook_deliveries "
                               "WHERE answer IS NOT NULL").fetchall()
            hits = [str(r[0]) for r in rows
                    if any(needle in _squash(t) for t in _texts(str(r[1])))]
            if hits and not dry_run:
                for msg_id in hits:
                    con.execute(self._sql("UPDATE webhook_deliveries SET status = 410, "
                                          "answer = ? WHERE id = ?"), (_ERASED, msg_id))
            return hits

        hits: list[str] = self._run(run, f"forgetting {subject!r} in the kept answers")
        if hits and not dry_run and self._con is not None:
            with self._lock:
                self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return hits

    def release(self, msg_id: str) -> None:
        """Give up the claim of a turn that failed: a retry runs it again."""
        with self._lock:
            self._marks.pop(msg_id, None)
        self._run(lambda con: con.execute(self._sql(
            "DELETE FROM webhook_deliveries WHERE id = ? AND owner = ? AND state = 'running'"),
            (msg_id, self.owner)), f"releasing {msg_id!r}")
