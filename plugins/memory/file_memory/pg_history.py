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

from .history import History, Version

__all__ = ["PgHistory", "PgMemoryExtras"]


class PgHistory(History):
    """The version log of one owner (the shared memory, or one user's) in PostgreSQL."""

    def __init__(self, run: Callable[..., Any],
                 connect: Callable[[], contextlib.AbstractContextManager[Any]], owner: str,
                 where: str, *, limit: int = 200) -> None:
        # no file: ``path`` is what messages show (the redacted URL and the owner)
        self.path = where  # type: ignore[assignment]
        self.directory = where  # type: ignore[assignment]
        self.limit = max(1, int(limit))
        self.owner = owner
        self._run_outside = run
        self._connect = connect
        self._bound = threading.local()

    # ---------------------------------------------------------------------- connections

    @contextlib.contextmanager
    def bound(self, con: Any) -> Iterator[None]:
        """Run this thread's history calls on ``con`` (the store's open transaction)."""
        previous = getattr(self._bound, "con", None)
        self._bound.con = con
        try:
            yield
        finally:
            self._bound.con = previous

    def _run(self, fn: Callable[[Any], Any], *, retry: bool = False) -> Any:
        con = getattr(self._bound, "con", None)
        if con is not None:
            return fn(con)
        return self._run_outside(fn, retry)

    # -------------------------------------------------------------------------- reading

    def newest(self) -> int:
        rows = self._run(lambda con: con.execute(
            "SELECT max(version) FROM memory_versions WHERE owner = %s",
            (self.owner,)).fetchall(), retry=True)
        return int(rows[0][0] or 0)

    def read(self) -> list[Version]:
        rows = self._run(lambda con: con.execute(
            "SELECT data FROM memory_versions WHERE owner = %s ORDER BY version",
            (self.owner,)).fetchall(), retry=True)
        out = []
        for (data,) in rows:
            try:
                out.append(Version.from_dict(json.loads(data)))
            except (ValueError, KeyError, TypeError):
                continue
        return out

    # -------------------------------------------------------------------------- writing

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the owner's history lock: in the bound transaction, or in one of its own
        (committed when the block ends, rolled back when it raises)."""
        if getattr(self._bound, "con", None) is not None:
            self._lock_head(self._bound.con)
            yield
            return
        with self._connect() as con, con.transaction(), self.bound(con):
            self._lock_head(con)
            yield

    def locked_call(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` with the owner's history lock held, in a transaction of its own (or in the
        bound one)."""
        if getattr(self._bound, "con", None) is not None:
            self._lock_head(self._bound.con)
            return fn()

        def run(con: Any) -> Any:
            with con.transaction(), self.bound(con):
                self._lock_head(con)
                return fn()

        return self._run_outside(run)

    def _lock_head(self, con: Any) -> tuple[int, dict[str, str | None]]:
        """Lock the owner's head row: (last version, the newest ``after`` of each store)."""
        con.execute("INSERT INTO memory_history_heads(owner, last) VALUES (%s, 0) "
                    "ON CONFLICT (owner) DO NOTHING", (self.owner,))
        last, after = con.execute("SELECT last, last_after FROM memory_history_heads "
                                  "WHERE owner = %s FOR UPDATE", (self.owner,)).fetchone()
        return int(last), json.loads(after or "{}")

    def append(self, build: Callable[[int], Version]) -> tuple[Version, int]:
        """Insert the version ``build(next number)`` (in the bound transaction)."""

        def run(con: Any) -> Version:
            last, last_after = self._lock_head(con)
            version = build(last + 1)
            for target, store in version.stores.items():
                if ("before" in store and target in last_after
                        and store["before"] == last_after[target]):
                    del store["before"]  # the previous version's "after": see state_at
                last_after[target] = store.get("after")
            con.execute("UPDATE memory_history_heads SET last = %s, last_after = %s "
                        "WHERE owner = %s",
                        (version.version, json.dumps(last_after), self.owner))
            con.execute("INSERT INTO memory_versions(owner, version, time, data) "
                        "VALUES (%s, %s, %s, %s)",
                        (self.owner, version.version, version.time, _dump(version)))
            return version

        return self._run(run), 0

    def undo(self, size: int) -> None:
        """Nothing to do: the version goes with the transaction that failed."""

    def _tail(self) -> tuple[int, int]:
        row = self._run(lambda con: con.execute(
            "SELECT coalesce(max(version), 0), count(*) FROM memory_versions WHERE owner = %s",
            (self.owner,)).fetchone(), retry=True)
        return int(row[0]), int(row[1])

    def prune(self) -> int:
        return int(self.locked_call(lambda: History.prune(self)))

    def _rewrite(self, versions: list[Version]) -> None:
        """Make the owner's log exactly ``versions`` (``prune``, ``redact``), in the bound
        transaction."""

        def run(con: Any) -> None:
            con.execute("DELETE FROM memory_versions WHERE owner = %s AND NOT "
                        "(version = ANY(%s))", (self.owner, [v.version for v in versions]))
            with con.cursor() as cur:
                cur.executemany(
                    "UPDATE memory_versions SET data = %s WHERE owner = %s AND version = %s",
                    [(_dump(v), self.owner, v.version) for v in versions])
            last_after: dict[str, str | None] = {}
            for item in versions:
                for target, store in item.stores.items():
                    last_after[target] = store.get("after")
            con.execute("UPDATE memory_history_heads SET last_after = %s WHERE owner = %s",
                        (json.dumps(last_after), self.owner))

        self._run(run)

    def redact(self, subject: str) -> int:
        return int(self.locked_call(lambda: History.redact(self, subject)))

    # ------------------------------------------------------------------------ transfer

    def import_versions(self, versions: list[Version]) -> int:
        """Copy ``versions`` in (``storage migrate``) when this owner has none yet; how many."""

        def run() -> int:
            con = self._bound.con
            (count,) = con.execute("SELECT count(*) FROM memory_versions WHERE owner = %s",
                                   (self.owner,)).fetchone()
            if count or not versions:
                return 0
            with con.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memory_versions(owner, version, time, data) "
                    "VALUES (%s, %s, %s, %s)",
                    [(self.owner, v.version, v.time, _dump(v)) for v in versions])
            con.execute("UPDATE memory_history_heads SET last = greatest(last, %s) "
                        "WHERE owner = %s", (max(v.version for v in versions), self.owner))
            self._rewrite(versions)  # sets the newest "after" of each store
            return len(versions)

        return int(self.locked_call(run))


def _dump(version: Version) -> str:
    # JSON escapes NUL as \u0000, so the text always fits a PostgreSQL text column
    return json.dumps(version.to_dict(), ensure_ascii=False, separators=(",", ":"))


class PgMemoryExtras:
    """Pins and the background curator's state of one owner (mixed into the PG store)."""

    owner: str
    _run_pg: Callable[..., Any]

    def read_pins(self) -> dict[str, list[str]]:
        row = self._run_pg(lambda con: con.execute(
            "SELECT data FROM memory_pins WHERE owner = %s", (self.owner,)).fetchone(), True)
        return _pins(row[0] if row else None)

    def update_pins(self, change: Callable[[dict[str, list[str]]], bool]) -> None:
        """Apply ``change`` to the pins under their row lock; saved when it returns True."""

        def run(con: Any) -> None:
            with con.transaction():
                con.execute("INSERT INTO memory_pins(owner, data) VALUES (%s, '{}') "
                            "ON CONFLICT (owner) DO NOTHING", (self.owner,))
                (data,) = con.execute("SELECT data FROM memory_pins WHERE owner = %s "
                                      "FOR UPDATE", (self.owner,)).fetchone()
                pins = _pins(data)
                if change(pins):
                    body = json.dumps({k: v for k, v in pins.items() if v}, ensure_ascii=False)
                    con.execute("UPDATE memory_pins SET data = %s WHERE owner = %s",
                                (body, self.owner))

        self._run_pg(run)

    def count_curator_session(self) -> int:
        """Count one more session end for the background curator; the new count."""
        row = self._run_pg(lambda con: con.execute(
            "INSERT INTO memory_state(owner, key, value) VALUES (%s, 'curator_sessions', '1') "
            "ON CONFLICT (owner, key) DO UPDATE SET value = "
            "(memory_state.value::bigint + 1)::text RETURNING value", (self.owner,)).fetchone())
        return int(row[0])

    def save_proposal(self, body: bytes) -> None:
        """Keep the background curator's last proposal (JSON) for ``memory curate``."""
        self._run_pg(lambda con: con.execute(
            "INSERT INTO memory_state(owner, key, value) VALUES (%s, 'curation_proposal', %s) "
            "ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value",
            (self.owner, body.decode("utf-8"))))

    def saved_proposal(self) -> str | None:
        row = self._run_pg(lambda con: con.execute(
            "SELECT value FROM memory_state WHERE owner = %s AND key = 'curation_proposal'",
            (self.owner,)).fetchone(), True)
        return str(row[0]) if row else None


def _pins(data: str | None) -> dict[str, list[str]]:
    try:
        parsed = json.loads(data) if data else {}
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(k): [str(x) for x in v] for k, v in parsed.items() if isinstance(v, list)}
