"""The session archive in a PostgreSQL database (``storage.url``): the same API as SessionArchive.

:class:`PgSessionArchive` is :class:`~.store.SessionArchive` over :class:`~.pg_db.PgDatabase`:
every method, listing, lineage query and import runs the same code on both backends; only what
the dialects cannot share is overridden here. Several processes (nodes) can use one database:
the session row is created with a unique id, and a node that loses the race to create it
retries and finds the winner's row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from hermes_core.storage import StorageURL
from hermes_core.types import Message, Session

from .errors import ArchiveWriteError, MessageNotStored
from .pg_db import PgDatabase
from .records import encode_message
from .store import _INSERT_MESSAGE, _USAGE_UPDATE, SessionArchive

__all__ = ["PgSessionArchive"]

T = TypeVar("T")


class _NoSpool:
    """The spool of a PostgreSQL archive: none (see :class:`PgSessionArchive`)."""

    def __init__(self, where: str) -> None:
        self.path = f"no local spool ({where} is shared by every node)"

    def has_pending(self) -> bool:
        return False

    def append(self, *records: Any) -> None:
        raise OSError("a PostgreSQL archive keeps no local spool")


class PgSessionArchive(SessionArchive):
    """The session archive in one PostgreSQL database."""

    backend = "postgresql"
    _all_rows = None

    def __init__(self, url: StorageURL) -> None:
        self.url = url
        self.db = PgDatabase(url)  # type: ignore[assignment]
        # named in messages, never opened
        self.path = url.redacted  # type: ignore[assignment]
        self._nums: dict[str, int] = {}
        self._created: list[tuple[str, int]] = []
        # No local spool: a node must not keep another node's conversation on its own disk, so a
        # failed append is an error the turn sees (the caller keeps the message in its history).
        self.spool = _NoSpool(url.redacted)  # type: ignore[assignment]

    def _not_kept(self, reason: str, spool_exc: OSError) -> ArchiveWriteError:
        where = "" if self.url.redacted in reason else f" at {self.url.redacted}"
        return MessageNotStored(
            f"a message could not be stored in the PostgreSQL archive{where} "
            f"({reason}). No node keeps messages on its own disk (the conversation may continue "
            "on another node), so it is not stored anywhere: send it again once the database "
            "answers."
        )

    def _write(self, tx: Callable[[Any], T]) -> T:
        unique = self.db.psycopg.errors.UniqueViolation  # type: ignore[attr-defined]
        try:
            return super()._write(tx)
        except unique:
            # another node created the same session meanwhile: the retry reads its row
            return super()._write(tx)

    def _update(self, session_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        num = self._nums.get(session_id)
        if num is None:
            super()._update(session_id, assignments, params)
            return
        # a known session: one UPDATE, committed on its own (one round trip)
        self.db.write_one(f"UPDATE sessions SET {assignments} WHERE num = ?", (*params, num))

    def _append_counted(self, session: Session | str, row: tuple[Any, ...],
                        usage: tuple[Any, ...]) -> int:
        sid = session.id if isinstance(session, Session) else session
        num = self._nums.get(sid)
        if num is None:
            return super()._append_counted(session, row, usage)
        # a known session: the counters' UPDATE rides along the INSERT, one statement committed
        # on its own (one round trip, one commit)
        return self.db.write_one(
            f"WITH counted AS (UPDATE sessions SET {_USAGE_UPDATE} WHERE num = ?) "
            f"{_INSERT_MESSAGE} RETURNING id", (*usage, num, num, *row))

    def append_messages(self, session: Session | str, messages: Iterable[Message]) -> list[int]:
        """Store several messages in one transaction, the inserts pipelined (one round trip
        for all of them instead of one each); return their ids."""
        rows = [encode_message(m)[0] for m in messages]
        sid = session.id if isinstance(session, Session) else session

        def tx(con: Any) -> list[int]:
            num = self._num(con, sid)
            if num is None:
                num = self._create_from(con, session)
            if not rows:
                return []
            ids: list[int] = con.insert_many(_INSERT_MESSAGE, [(num, *r) for r in rows])
            return ids

        return self._write(tx)
