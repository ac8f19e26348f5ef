"""MEMORY.md / USER.md in a PostgreSQL database (``storage.url``): only the medium changes.

:class:`PgMemoryStore` is :class:`~.store.MemoryStore` with each document kept as one row of
``memory_documents`` (owner, target, text) instead of a file. Everything else is the file
store's own code: validation and the threat scan (ops.py), the ``§`` format and the budgets
(entries.py), the frozen snapshot (snapshot.py), the all-or-nothing batches. A mutation locks the
row (``SELECT ... FOR UPDATE``) in place of the ``.lock`` file, re-reads it under the lock, applies
the change and writes it back in the same transaction, so no concurrent write from any node is
ever lost. ``owner`` is the user key with ``memory.scope: user`` ('' for the shared memory).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, cast

from hermes_core.storage import StorageURL, get_pool
from hermes_core.storage.migrations import PgMigration, migrate
from hermes_core.storage.pool import connect_error, import_psycopg

from .entries import canonical_text, parse_entries
from .errors import MemoryRefused, WriteFailed
from .history import Provenance
from .ops import Applied
from .store import FILENAMES, FileState, MemoryStore, WriteResult, check_target

__all__ = ["COMPONENT", "MIGRATIONS", "PgMemoryStore"]

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
]


class PgMemoryStore(MemoryStore):
    """The two bounded stores of one owner, in PostgreSQL."""

    def __init__(
        self, url: StorageURL, *, owner: str = "", memory_limit: int = 2200,
        user_limit: int = 1375,
    ) -> None:
        self.url = url
        self.owner = owner
        self.limits = {"memory": memory_limit, "user": user_limit}
        # what messages and listings show as "where": never a real path, never the password
        self.directory = PurePosixPath(url.redacted.replace("/", "|")) / (owner or "_shared")  # type: ignore[assignment]
        self._swept: set[str] = set()
        self._psycopg = import_psycopg()
        self._pool: Any = cast(Any, get_pool(url))
        with self._pool.connection() as con:
            migrate(con, url, COMPONENT, MIGRATIONS)

    def path(self, target: str) -> _Where:  # type: ignore[override]
        name = FILENAMES[check_target(target)]
        where = f"{self.url.redacted} ({name}{', user ' + self.owner if self.owner else ''})"
        return _Where(where, name)

    def _run(self, fn: Callable[[Any], Any], target: str) -> Any:
        psycopg = self._psycopg
        try:
            with self._pool.connection() as con:
                return fn(con)
        except MemoryRefused:
            raise
        except psycopg.OperationalError as exc:
            raise WriteFailed(str(connect_error(self.url, exc)), target=target) from None
        except psycopg.Error as exc:
            raise WriteFailed(f"the memory store in {self.url.redacted} refused the write: "
                              f"{exc}; nothing was changed", target=target) from None

    def read(self, target: str) -> FileState:
        target = check_target(target)

        def run(con: Any) -> FileState:
            row = con.execute("SELECT text FROM memory_documents WHERE owner = %s AND "
                              "target = %s", (self.owner, target)).fetchone()
            if row is None:
                return FileState([])
            return FileState(parse_entries(row[0]), raw=row[0].encode("utf-8"))

        try:
            return self._run(run, target)  # type: ignore[no-any-return]
        except WriteFailed as exc:
            # as with an unreadable file: reported in the state, never raised on a read
            return FileState([], problem=exc.message)

    def overwrite(
        self, target: str, entries: list[str], *, expected: bytes | None,
        by: Provenance | None = None, action: str = "edit",
        changes: list[dict[str, object]] | None = None,
    ) -> WriteResult:
        # Versions (memory history) are kept by the file store only: on PostgreSQL the
        # provenance arguments are accepted and not recorded yet (docs/storage.md, limits).
        target = check_target(target)

        def change(current: list[str], raw: bytes | None) -> tuple[list[str], list[Applied]]:
            if raw != expected:
                raise MemoryRefused(
                    f"{self.path(target)} changed while you were editing it; nothing was "
                    "saved. Run the command again to edit the new version.", target=target)
            return list(entries), []

        return self._pg_transact(target, change)

    def _transact(
        self,
        target: str,
        change: Callable[[list[str]], tuple[list[str], list[Applied]]],
        *,
        force_write: bool = False,
        by: Provenance | None = None,
        action: str = "edit",
        **_history: Any,
    ) -> WriteResult:
        return self._pg_transact(target, lambda current, _raw: change(current))

    def _pg_transact(
        self, target: str,
        change: Callable[[list[str], bytes | None], tuple[list[str], list[Applied]]],
    ) -> WriteResult:
        limit = self.limits[target]

        def run(con: Any) -> WriteResult:
            with con.transaction():
                con.execute("INSERT INTO memory_documents(owner, target) VALUES (%s, %s) "
                            "ON CONFLICT DO NOTHING", (self.owner, target))
                (text,) = con.execute(
                    "SELECT text FROM memory_documents WHERE owner = %s AND target = %s "
                    "FOR UPDATE", (self.owner, target)).fetchone()
                current = parse_entries(text)
                raw = text.encode("utf-8") if text else None
                new, applied = change(current, raw)
                if new == current:
                    return WriteResult(target, applied, current, limit, written=False)
                con.execute(
                    "UPDATE memory_documents SET text = %s, version = version + 1, "
                    "updated_at = extract(epoch FROM now()) WHERE owner = %s AND target = %s",
                    (canonical_text(new), self.owner, target))
                return WriteResult(target, applied, new, limit, written=True)

        return self._run(run, target)  # type: ignore[no-any-return]


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
