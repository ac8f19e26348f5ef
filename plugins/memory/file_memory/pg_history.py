"""The memory history, pins and curator state in the ``storage.url`` database.

:class:`PgHistory` is :class:`~.history.History` (the versions of MEMORY.md / USER.md, with who
changed what, when, and the stores' text after it) kept as rows of ``memory_versions`` instead
of lines of ``history.jsonl``. The numbering, the pruning limit, ``state_at``, ``get`` and
``redact`` (``forget``) are the file history's own rules; only the medium changes:

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
import threading
from collections.abc import Callable, Iterator
from typing import Any

from hermes_core.storage.dialect import PgDatabase

from .history import History, Version, dump, newest_after

__all__ = ["PgHistory", "PgMemoryExtras"]


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
        out = []
        for (data,) in rows:
            try:
                out.append(Version.from_dict(json.loads(data)))
            except (ValueError, KeyError, TypeError):
                continue
        return out

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


class PgMemoryExtras:
    """Pins and the background curator's state of one owner (mixed into the PG store)."""

    owner: str
    db: PgDatabase

    def read_pins(self) -> dict[str, list[str]]:
        row = self.db.fetchone("SELECT data FROM memory_pins WHERE owner = ?", (self.owner,))
        return _pins(row[0] if row else None)

    def update_pins(self, change: Callable[[dict[str, list[str]]], bool]) -> None:
        """Apply ``change`` to the pins under their row lock; saved when it returns True."""
        db = self.db
        with db.transaction() as con:
            con.execute(db.sql("INSERT INTO memory_pins(owner, data) VALUES (?, '{}') "
                               "ON CONFLICT (owner) DO NOTHING"), (self.owner,))
            (data,) = db.rows(con, "SELECT data FROM memory_pins WHERE owner = ? FOR UPDATE",
                              (self.owner,))[0]
            pins = _pins(data)
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


def _pins(data: str | None) -> dict[str, list[str]]:
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(k): [str(x) for x in v] for k, v in parsed.items() if isinstance(v, list)}
