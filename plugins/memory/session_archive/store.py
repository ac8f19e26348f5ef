"""SessionArchive: the library API over state.db (sessions, messages, lineage, listings);
PgSessionArchive: the same over a PostgreSQL database (``storage.url``), where only the
database (pg_db.py) and the spool differ.

Search lives in search.py and import/export in transfer.py; both work on a SessionArchive.
Listings (sessions by activity, lineage, chains, resuming) are listings.py's.
Every write is one short transaction (an append is one INSERT whose triggers update the indexes
and the session's counters), so several processes can share one archive.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from hermes_core.storage.errors import StorageError
from hermes_core.storage.spool import Spool, SpoolEntry
from hermes_core.types import Message, Session, Usage

from .db import Database, spool_path
from .errors import (
    ArchiveError,
    ArchiveReadOnlyError,
    ArchiveWriteError,
    MessageNotStored,
    SessionNotFoundError,
)
from .listings import LINEAGE_CTE, LINEAGE_SQL, Listings
from .records import (
    SessionRecord,
    StoredMessage,
    _json,
    clean_text,
    encode_message,
    session_from_spool,
    spool_record,
    valid_json,
)

if TYPE_CHECKING:
    from hermes_core.storage import StorageURL

__all__ = ["LINEAGE_CTE", "LINEAGE_SQL", "PgSessionArchive", "SessionArchive", "base_title"]

log = logging.getLogger("hermes_core.plugins.session_archive")
T = TypeVar("T")

_INSERT_MESSAGE = (
    "INSERT INTO messages(session, role, content, tool_name, tool_call_id, tool_calls, "
    "timestamp, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_TITLE_NUMBER = re.compile(r"\s+#\d+$")
#: a spooled record refused for its content (never a full disk, a lock, I/O: OperationalError)
_REFUSED = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError,
            sqlite3.ProgrammingError, KeyError, IndexError, TypeError, ValueError, AttributeError)
#: one API call added to a session's counters (:meth:`SessionArchive.record_usage`)
_USAGE_UPDATE = (
    "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, "
    "cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?, "
    "api_calls = api_calls + ?, cost_usd = cost_usd + ?, model = coalesce(model, ?)"
)


def _usage_params(usage: Usage | None, cost_usd: float, api_calls: int) -> tuple[Any, ...]:
    u = usage or Usage()
    return (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens,
            api_calls, float(cost_usd), u.model)



def base_title(title: str) -> str:
    """``"Deploy notes #3"`` -> ``"Deploy notes"``."""
    return _TITLE_NUMBER.sub("", title)


class SessionArchive(Listings):
    """The session archive in one state.db file (its listings: :class:`.listings.Listings`)."""

    #: which database holds it ("postgresql": :class:`PgSessionArchive`)
    backend: str = "sqlite"

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 30.0,
        synchronous: Literal["normal", "full"] = "full",
        background_checkpoints: bool = True,
        read_only: bool = False,
        integrity_check: bool = True,
    ) -> None:
        self.path = Path(path)
        #: messages that could not be stored wait here (hermes_core.storage.spool)
        self.spool = Spool(spool_path(self.path))
        self.db = Database(
            self.path, busy_timeout=busy_timeout, synchronous=synchronous,
            background_checkpoints=background_checkpoints, read_only=read_only,
            integrity_check=integrity_check,
        )
        #: session id -> num, filled as sessions are seen (nums never change)
        self._nums: dict[str, int] = {}
        #: ids created by the transaction in progress, forgotten again if it rolls back
        #: sessions created by the transaction running now: (id, num), cached once it commits
        self._created: list[tuple[str, int]] = []
        if not read_only:
            try:
                self.replay_spool()
            except ArchiveError as exc:  # the next append tries again and reports it
                log.error("%s: spooled messages could not be stored yet: %s", self.path, exc)

    @property
    def read_only(self) -> bool:
        return self.db.read_only

    @property
    def note(self) -> str | None:
        """Set when a read-only open cannot see the latest changes."""
        return self.db.note

    @classmethod
    def in_home(cls, home: Path, **kwargs: Any) -> SessionArchive:
        """The archive at ``<home>/state.db``."""
        return cls(Path(home) / "state.db", **kwargs)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SessionArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------- sessions

    def _num(self, con: sqlite3.Connection, session_id: str) -> int | None:
        num = self._nums.get(session_id)
        if num is None:
            row = con.execute("SELECT num FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                return None
            num = row[0]
            if all(sid != session_id for sid, _ in self._created):  # committed: cache it
                self._nums[session_id] = num
        return num

    def _create(
        self,
        con: sqlite3.Connection,
        session_id: str,
        *,
        platform: str = "cli",
        model: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        origin: str = "new",
        started_at: float | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> int:
        started = time.time() if started_at is None else float(started_at)
        chain: int | None = None
        if parent_session_id and origin == "compression":
            parent = con.execute(
                "SELECT num, chain, title FROM sessions WHERE id = ?", (parent_session_id,)
            ).fetchone()
            if parent is not None:
                chain = parent[1]
                con.execute("UPDATE sessions SET superseded = 1 WHERE num = ?", (parent[0],))
                position = con.execute(
                    "SELECT count(*) FROM sessions WHERE chain = ?", (chain,)
                ).fetchone()[0] + 1
                name = title or parent[2]
                title = f"{base_title(name)} #{position}" if name else None
        attrs = _json(attributes) if attributes else None
        user = (attributes or {}).get("user_id")
        cur = con.execute(
            "INSERT INTO sessions(id, platform, model, title, started_at, updated_at, "
            "parent_session_id, origin, chain, attributes, user_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            (session_id, platform, model, title, started, started, parent_session_id, origin,
             attrs, user if isinstance(user, str) and user else None),
        )
        num = int(cur.lastrowid or 0)
        con.execute("UPDATE sessions SET chain = ? WHERE num = ?", (chain or num, num))
        self._created.append((session_id, num))
        return num

    def _write(self, tx: Callable[[sqlite3.Connection], T]) -> T:
        """``db.write`` that keeps the id cache true: a session created by ``tx`` enters it only
        once the transaction has committed (another thread's append reads the cache without a
        transaction; on PostgreSQL, on another connection, where an uncommitted or rolled-back
        session row does not exist)."""
        try:
            return self._write_once(tx)
        except self.db.retried:
            # PostgreSQL: another node created the same session meanwhile; the retry reads its row
            return self._write_once(tx)

    def _write_once(self, tx: Callable[[sqlite3.Connection], T]) -> T:
        with self.db.lock:  # re-entrant: db.write takes it again; _created stays this call's
            try:
                out = self.db.write(tx)
                for sid, num in self._created:
                    self._nums[sid] = num
                return out
            finally:
                self._created.clear()

    def open_session(
        self,
        session: Session | str,
        *,
        origin: str | None = None,
        platform: str | None = None,
        model: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        started_at: float | None = None,
    ) -> bool:
        """Create the session's row if it does not exist; return whether it was created.

        A session opened with ``origin="compression"`` joins its parent's compaction chain: the
        parent is marked superseded and the title is numbered ("Title #2", "#3", ...). Without
        ``origin``, a session with a parent is taken for a compaction's child (what the agent
        opens mid-conversation); an explicit ``new``, ``branch`` or ``reset`` corrects that guess
        for a session that already exists.
        """
        if isinstance(session, Session):
            sid = session.id
            platform = platform or session.platform
            model = model or session.model
            title = title or session.title
            parent_session_id = parent_session_id or session.parent_session_id
            started_at = session.started_at if started_at is None else started_at
            attributes = session.attributes
        else:
            sid, attributes = session, None

        if sid in self._nums and origin not in ("new", "branch", "reset"):
            return False  # a committed session this archive has seen: nothing to create or fix

        def tx(con: sqlite3.Connection) -> bool:
            num = self._num(con, sid)
            if num is not None:
                if origin in ("new", "branch", "reset"):
                    self._detach(con, num, origin)
                return False
            guess = _origin(attributes, parent_session_id)
            self._create(con, sid, platform=platform or "cli", model=model, title=title,
                         parent_session_id=parent_session_id, origin=origin or guess,
                         started_at=started_at, attributes=attributes)
            return True

        return self._write(tx)

    def _detach(self, con: sqlite3.Connection, num: int, origin: str) -> None:
        """Undo a guess: a session created by its first message (which arrives on the turn's
        thread, before the switch reaches the worker) looked like a compaction's child because it
        had a parent; the switch now says it is a branch or a new start, so it leaves the chain."""
        row = con.execute(
            "SELECT origin, chain, parent_session_id, title FROM sessions WHERE num = ?", (num,)
        ).fetchone()
        if row is None or row[0] != "compression" or row[1] == num:
            return
        con.execute("UPDATE sessions SET origin = ?, chain = ?, title = ? WHERE num = ?",
                    (origin, num, base_title(row[3]) if row[3] else None, num))
        con.execute(
            "UPDATE sessions SET superseded = CASE WHEN EXISTS (SELECT 1 FROM sessions AS c "
            "WHERE c.parent_session_id = sessions.id AND c.origin = 'compression') THEN 1 "
            "ELSE 0 END WHERE id = ?",
            (row[2],),
        )

    def end_session(self, session_id: str, reason: str, *, ended_at: float | None = None) -> None:
        """Record when and why a session ended (a missing session is an error)."""
        when = time.time() if ended_at is None else ended_at
        self._update(session_id, "ended_at = ?, end_reason = ?", (when, str(reason)))
        # a server ending many sessions (an MCP server's expired ones) keeps nothing of them;
        # a resumed session's number is read again
        self._nums.pop(session_id, None)

    def reopen_session(self, session_id: str) -> None:
        """A resumed session is live again: clear its end."""
        self._update(session_id, "ended_at = NULL, end_reason = NULL", ())

    def set_title(self, session_id: str, title: str) -> None:
        """Title a session's whole compaction chain: "Title", "Title #2", "Title #3", ..."""
        title, _ = clean_text(base_title(title.strip()))

        def tx(con: sqlite3.Connection) -> None:
            num = self._num(con, session_id)
            if num is None:
                raise self._missing(session_id)
            chain = con.execute("SELECT chain FROM sessions WHERE num = ?", (num,)).fetchone()[0]
            members = con.execute(
                "SELECT num FROM sessions WHERE chain = ? ORDER BY num", (chain,)
            ).fetchall()
            for i, (member,) in enumerate(members, 1):
                con.execute("UPDATE sessions SET title = ? WHERE num = ?",
                            (title if i == 1 else f"{title} #{i}", member))

        self._write(tx)

    def record_usage(
        self, session_id: str, usage: Usage | None = None, *, cost_usd: float = 0.0,
        api_calls: int = 1,
    ) -> None:
        """Add one API call's token counts (and its cost, if known) to the session's counters."""
        self._update(session_id, _USAGE_UPDATE, _usage_params(usage, cost_usd, api_calls))

    def _update(self, session_id: str, assignments: str, params: tuple[Any, ...]) -> None:
        num = self._nums.get(session_id)
        if num is not None:  # a known session: one UPDATE, committed on its own
            self.db.write_one(f"UPDATE sessions SET {assignments} WHERE num = ?", (*params, num))
            return

        def tx(con: sqlite3.Connection) -> None:
            num = self._num(con, session_id)
            if num is None:
                raise self._missing(session_id)
            con.execute(f"UPDATE sessions SET {assignments} WHERE num = ?", (*params, num))

        self._write(tx)

    def _missing(self, session_id: str) -> SessionNotFoundError:
        return SessionNotFoundError(
            f"no session {session_id!r} in {self.path}; 'hermes-core sessions list' shows the ids"
        )

    # ------------------------------------------------------------------------------- messages

    def append_message(
        self, session: Session | str, message: Message, *, usage: Usage | None = None
    ) -> int:
        """Store one message at the end of a session (created if new); return its id.

        ``usage``: the API call that produced the message, added to the session's counters in
        the same write (as :meth:`record_usage` would, without a second commit).

        When the archive cannot store it (disk full, a damaged page, a lock held too long), the
        message is kept durably in the spool and :class:`ArchiveWriteError` says so; it is stored,
        in order and once, by the next append or open that succeeds (its usage is not counted).
        """
        row, repairs = encode_message(message)
        if repairs:
            log.warning("message repaired before storing (%d lone surrogates replaced)", repairs)
        try:
            if self.spool.has_pending():  # earlier messages first: order is kept
                self.replay_spool()
            counted = None if usage is None else _usage_params(usage, 0.0, 1)
            return self._append(session, [row], counted)[0]
        except (ArchiveError, StorageError, sqlite3.Error) as exc:
            if isinstance(exc, ArchiveReadOnlyError):
                raise
            raise self._spool_failed(session, row, exc) from exc

    def _spool_failed(
        self, session: Session | str, row: tuple[Any, ...], exc: BaseException
    ) -> ArchiveWriteError:
        reason = str(self.db._translate(exc) if isinstance(exc, sqlite3.DatabaseError) else exc)
        try:
            self.spool.append(spool_record(session, row))
        except OSError as spool_exc:
            return self._not_kept(reason, spool_exc)
        return ArchiveWriteError(
            f"a message could not be stored in the session archive ({reason}). It was kept in "
            f"{self.spool.path} and will be stored, in order, as soon as the archive can be "
            "written again"
        )

    def _not_kept(self, reason: str, spool_exc: OSError) -> ArchiveWriteError:
        return MessageNotStored(
            f"a message could NOT be stored: the archive failed ({reason}) and so did keeping it "
            f"in {self.spool.path} ({spool_exc.strerror or spool_exc}). Free disk space and send "
            "it again."
        )

    def replay_spool(self) -> int:
        """Store the spooled messages now, in order, in one transaction; return how many.

        As the spool's only consumer (another process replaying waits); the spool is emptied
        after the commit, and each message's spool id is noted in ``meta`` in the same commit, so
        a crash in between stores nothing twice. Raises while the archive cannot write (the
        spool is then left as it was).
        """
        if not self.spool.has_pending():
            return 0
        try:
            with self.spool.consuming() as entries:
                count = self._store_spooled(entries) if entries else 0
                self.spool.ack(entries)
        except sqlite3.DatabaseError as exc:
            raise self.db._translate(exc) from exc
        if count:
            log.warning("%s: stored %d message(s) that had waited in %s", self.path, count,
                        self.spool.path.name)
        return count

    def _store_spooled(self, entries: list[SpoolEntry]) -> int:
        """Store ``entries`` in order in one transaction; one refused for what it holds (see
        ``_REFUSED``) is moved to the spool's rejected file after the commit, with an error."""
        refused: list[tuple[dict[str, Any], BaseException]] = []

        def tx(con: sqlite3.Connection) -> int:
            stored = 0
            refused.clear()  # a retried transaction starts again
            for entry in entries:
                mark = "spooled:" + str(entry.record.get("id"))
                if con.execute("SELECT 1 FROM meta WHERE key = ?", (mark,)).fetchone():
                    continue
                created = len(self._created)
                con.execute("SAVEPOINT spooled")
                try:
                    if "id" not in entry.record or not isinstance(entry.record.get("row"), list):
                        raise ValueError("not a message record (no id or row)")
                    num = self._session_num(con, session_from_spool(dict(entry.record["session"])))
                    row = list(entry.record["row"])
                    row[4], row[6] = valid_json(row[4]), valid_json(row[6])  # tool_calls, meta
                    rowid = int(con.execute(_INSERT_MESSAGE, (num, *row)).lastrowid or 0)
                    con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                (mark, str(rowid)))
                except _REFUSED as exc:  # this record's content: the others are stored
                    con.execute("ROLLBACK TO spooled")
                    del self._created[created:]  # a session it created is gone again
                    refused.append((entry.record, exc))
                else:
                    stored += 1
                con.execute("RELEASE spooled")  # (any other error ends the transaction)
            return stored

        stored, aside = self._write(tx), self.spool.rejected_spool()
        try:  # the spool is acknowledged after this: a failure leaves it all (stored ones marked)
            aside.append(*({**record, "rejected": f"{type(why).__name__}: {why}",
                            "rejected_at": time.time()} for record, why in refused))
        except OSError as exc:
            raise ArchiveWriteError(f"spooled messages the archive refused could not be moved "
                                    f"to {aside.path} ({exc}); they wait in the spool") from exc
        for record, why in refused:
            log.error("%s: a message of %s was refused by the archive (%s: %s) and moved to %s "
                      "for a person to look at; the others were stored: %.200r", self.path,
                      self.spool.path.name, type(why).__name__, why, aside.path, record)
        return stored

    def _append(self, session: Session | str, rows: list[tuple[Any, ...]],
                usage: tuple[Any, ...] | None = None) -> list[int]:
        """Store ``rows`` at the end of ``session`` (created if new) in one write, ``usage``
        added to its counters; their ids."""
        sid = session.id if isinstance(session, Session) else session
        num = self._nums.get(sid)
        if num is not None and len(rows) == 1:  # the common case: one autocommit statement
            if usage is None:
                return [self.db.write_one(_INSERT_MESSAGE, (num, *rows[0]))]
            if self.backend == "postgresql":  # the counters' UPDATE rides along the INSERT
                return [self.db.write_one(
                    f"WITH counted AS (UPDATE sessions SET {_USAGE_UPDATE} WHERE num = ?) "
                    f"{_INSERT_MESSAGE} RETURNING id", (*usage, num, num, *rows[0]))]

        def tx(con: sqlite3.Connection) -> list[int]:
            num = self._session_num(con, session)
            ids = self.db.insert_many(con, _INSERT_MESSAGE, [(num, *r) for r in rows])
            if usage is not None:
                con.execute(f"UPDATE sessions SET {_USAGE_UPDATE} WHERE num = ?", (*usage, num))
            return ids

        return self._write(tx)

    def append_messages(self, session: Session | str, messages: Iterable[Message]) -> list[int]:
        """Store several messages in one transaction; return their ids."""
        return self._append(session, [encode_message(m)[0] for m in messages])

    def _session_num(self, con: sqlite3.Connection, session: Session | str) -> int:
        """The session's num, its row created when it is new (in ``con``'s transaction)."""
        num = self._num(con, session.id if isinstance(session, Session) else session)
        return self._create_from(con, session) if num is None else num

    def _create_from(self, con: sqlite3.Connection, session: Session | str) -> int:
        if isinstance(session, Session):
            return self._create(
                con, session.id, platform=session.platform, model=session.model,
                title=session.title, parent_session_id=session.parent_session_id,
                origin=_origin(session.attributes, session.parent_session_id),
                started_at=session.started_at, attributes=session.attributes,
            )
        return self._create(con, session)

    # -------------------------------------------------------------------------------- reading

    def get_session(self, session_id: str) -> SessionRecord:
        found = self._with_chains(self.db.read(
            f"SELECT {SessionRecord.COLUMNS}, s.chain FROM sessions AS s WHERE s.id = ?",
            (session_id,)))
        if not found:
            raise self._missing(session_id)
        return found[0]

    def has_session(self, session_id: str) -> bool:
        return bool(self.db.read("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    def messages(
        self, session_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        """A session's messages in order (``limit``/``offset`` page through them)."""
        if not self.has_session(session_id):
            raise self._missing(session_id)
        rows = self.db.read(
            f"SELECT {StoredMessage.COLUMNS} FROM messages AS m JOIN sessions AS s "
            "ON s.num = m.session WHERE s.id = :sid ORDER BY m.id LIMIT :limit OFFSET :offset",
            {"sid": session_id, "limit": -1 if limit is None else limit, "offset": offset},
        )
        return [StoredMessage.from_row(r) for r in rows]

    def messages_by_id(self, ids: Sequence[int]) -> dict[int, StoredMessage]:
        rows = self.read_in(f"SELECT {StoredMessage.COLUMNS} FROM messages AS m JOIN sessions "
                            "AS s ON s.num = m.session WHERE m.id IN ({marks})", ids)
        return {r[0]: StoredMessage.from_row(r) for r in rows}

    def count_messages(self) -> int:
        return int(self.db.read("SELECT count(*) FROM messages")[0][0])

    def show(self, session_id: str) -> dict[str, Any]:
        """A session's record and its messages, as plain data."""
        record = self.get_session(session_id)
        rows = self.db.read("SELECT id, origin, title FROM sessions WHERE parent_session_id = ? "
                            "ORDER BY num", (session_id,))
        return {
            "session": record.to_dict(),
            "children": [r[0] for r in rows],
            # the child sessions of delegate_task calls made in this session
            "delegations": [{"id": r[0], "title": r[2]} for r in rows if r[1] == "delegation"],
            "messages": [m.to_dict() for m in self.messages(session_id)],
        }

    def facts(self, *, user: str | None = None, all_users: bool = False,
              current_only: bool = False, session_id: str | None = None,
              limit: int = 100) -> list[dict[str, Any]]:
        """Derived memory (``session_archive.derive``): stored facts as plain data, newest
        first (see :func:`.facts.list_facts`)."""
        from .facts import list_facts

        return [f.to_dict() for f in list_facts(self, user=user, all_users=all_users,
                                                current_only=current_only,
                                                session_id=session_id, limit=limit)]


class _NoSpool:
    """The spool of a PostgreSQL archive: none (see :class:`PgSessionArchive`)."""

    def __init__(self, where: str) -> None:
        self.path = f"no local spool ({where} is shared by every node)"

    def has_pending(self) -> bool:
        return False

    def append(self, *records: Any) -> None:
        raise OSError("a PostgreSQL archive keeps no local spool")


class PgSessionArchive(SessionArchive):
    """The session archive in one PostgreSQL database (``storage.url``): the same code over
    :class:`~.pg_db.PgDatabase`. Several processes (nodes) can use one database: the session
    row is created with a unique id, and a node that loses the race to create it retries and
    finds the winner's row (:meth:`SessionArchive._write`)."""

    backend = "postgresql"

    def __init__(self, url: StorageURL) -> None:
        from .pg_db import PgDatabase

        self.url = url
        self.db = PgDatabase(url)  # type: ignore[assignment]
        # named in messages, never opened
        self.path = url.redacted  # type: ignore[assignment]
        self._nums = {}
        self._created = []
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


def _origin(attributes: dict[str, Any] | None, parent_session_id: str | None) -> str:
    """The origin of a session first seen through a message: a subagent's session is a
    delegation (not part of its parent's compaction chain), a child otherwise a compaction's."""
    if (attributes or {}).get("agent_context") == "subagent":
        return "delegation"
    return "compression" if parent_session_id else "new"
