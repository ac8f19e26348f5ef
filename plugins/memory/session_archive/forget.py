"""Deleting from the archive: ``forget`` (messages mentioning a subject) and ``sessions delete``.

Both run in one write transaction: a crash or an error leaves the archive as it was. Deleting a
message row fires the schema's delete triggers, which take it out of the FTS5 index (and the CJK
indexes) and lower its session's message count, so a deleted message can no longer be found by
``session_search`` or ``sessions search``.

Matching (``forget``): a message mentions the subject when its text or its tool-call arguments
contain it, ignoring case and runs of whitespace. The whole message is deleted (a tool call whose
result is deleted is repaired away when the session is resumed, as after any gap). Session titles
that mention it are cleared. The scan prefilters rows in SQL on the subject's longest ASCII word
and checks each candidate exactly in Python, so it stays well under a second at 100k messages.

Kept small and apart from the store on purpose: the functions take a
:class:`~.store.SessionArchive` and use its one write path.

Messages still waiting in the archive's spool (the archive could not store them yet) are
scrubbed first, with the same matching and scope: they are never stored, and the spooled
sessions' titles that mention the subject are cleared.

A forget that lands while a turn is in flight (:class:`LateForgets`): its archived copy is removed
when it is written.

A conversation's history is loaded from the archive at one point; its later writes (the answer,
tool results) derive from that history and may mention a subject forgotten since. Each
conversation (session id) keeps the erasure log's *settled* mark read just before its history was
loaded (:meth:`hermes_core.storage.erasure_log.ErasureLog.settled`); after each message is stored,
the forgets noted since that mark are checked against the message, and one it mentions is
forgotten again in the archive (the same matching and scope as ``forget``). The mark does not move
while the conversation lives: a rebuilt conversation (the dispatcher does that after an erasure)
is loaded again and takes a new mark.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes_core.storage.erasure_log import ErasureLog, squash, strings
from hermes_core.storage.spool import Scrub
from hermes_core.types import Message, Session

from .facts import mentioning
from .impacts import forget_words
from .records import like_pattern
from .store import SessionArchive
from .vector_store import vector_store

__all__ = ["ArchiveForget", "DeletedSessions", "LateForgets", "count_messages",
           "delete_sessions", "forget_messages", "purge_index", "purge_wal"]

log = logging.getLogger("hermes_core.session_archive")

_CHUNK = 500
#: the FTS5 tables indexing messages (schema.py)
_WORD_INDEXES = ("messages_fts", "messages_cjk", "messages_cjk_grams")
#: what the derivation's last problem becomes when its text mentioned a forgotten subject
_FORGOTTEN_PROBLEM = "(the text of this problem mentioned a forgotten subject)"

@dataclass(slots=True)
class ArchiveForget:
    #: (message id, session id, role, a short preview) of each matching message
    messages: list[tuple[int, str, str, str]] = field(default_factory=list)
    #: ids of sessions whose title mentions the subject
    titles: list[str] = field(default_factory=list)
    #: (id, session id, text) of derived facts mentioning it or read from a matching message
    facts: list[tuple[int, str, str]] = field(default_factory=list)
    deleted: int = 0
    dry_run: bool = False
    #: (session id, role, a short preview) of each matching message still waiting in the spool
    pending: list[tuple[str, str, str]] = field(default_factory=list)
    #: a line for each message the archive refused (set aside beside the spool) and each
    #: unreadable spool line that mention it
    aside: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return (len(self.messages) + len(self.titles) + len(self.facts) + len(self.pending)
                + len(self.aside))


@dataclass(slots=True)
class DeletedSessions:
    sessions: list[str]
    messages: int


def _scope_sql(scope: str) -> tuple[str, tuple[Any, ...]]:
    if scope == "all":
        return "", ()
    if scope.startswith("user:") and scope[5:]:
        return " AND s.user_id = ?", (scope[5:],)
    raise ValueError(f"unknown scope {scope!r}: use 'all' or 'user:<key>'")


def _find(read: Callable[[str, tuple[Any, ...]], list[Any]], subject: str,
          scope: str) -> ArchiveForget:
    """What mentions ``subject`` (messages, titles, derived facts); ``read`` runs a query (in
    SQLite's dialect, which the PostgreSQL archive translates) and returns its rows."""
    needle = squash(subject)
    where, params = _scope_sql(scope)
    words = [w for w in needle.split() if w.isascii()]
    sql = ("SELECT m.id, s.id, m.role, m.content, m.tool_calls FROM messages AS m "
           "JOIN sessions AS s ON s.num = m.session WHERE 1 = 1" + where)
    args: tuple[Any, ...] = params
    if words:  # a cheap SQL prefilter on the longest ASCII word; the exact check follows
        word = max(words, key=len)
        pattern = f"%{like_pattern(word)}%"
        escaped = f"%{like_pattern(json.dumps(word)[1:-1])}%"  # as the calls' JSON holds it
        sql += (" AND (lower(m.content) LIKE ? ESCAPE '\\' OR "
                "lower(m.tool_calls) LIKE ? ESCAPE '\\' OR lower(m.tool_calls) LIKE ? ESCAPE '\\')")
        args = (*params, pattern, pattern, escaped)
    found = ArchiveForget()
    for mid, sid, role, content, calls in read(sql, args):
        if _mentions(needle, content, calls):
            preview = " ".join(content.split())
            found.messages.append((mid, sid, role, preview[:100]))
    for sid, title in read(
            "SELECT s.id, s.title FROM sessions AS s WHERE s.title IS NOT NULL" + where, params):
        if needle in squash(title):
            found.titles.append(sid)
    found.facts = mentioning(read, needle, where, params, [m[0] for m in found.messages])
    return found


def _mentions(needle: str, content: str, calls: str | None) -> bool:
    return needle in squash(content) or bool(calls and (needle in squash(calls) or any(
        needle in squash(text) for text in json_strings(calls))))


def _scrub_spool(archive: SessionArchive, subject: str, scope: str,
                 dry_run: bool) -> tuple[list[tuple[str, str, str]], list[str]]:
    """Drop (unless ``dry_run``) the spooled messages in ``scope`` mentioning ``subject`` (and
    clear such titles of spooled sessions), those the archive refused too, and the spool's
    unreadable lines mentioning it; return (session id, role, preview) of each waiting message,
    and a line for each refused message or unreadable line."""
    if archive.backend != "sqlite":  # a PostgreSQL archive keeps no spool
        return [], []
    spool = archive.spool
    needle, user = squash(subject), scope[5:] if scope.startswith("user:") else None
    owners: dict[str, str | None] = {}

    def owner(sid: str) -> str | None:  # a record naming only its session: the archive knows
        if sid not in owners:
            rows = archive.db.read("SELECT user_id FROM sessions WHERE id = ?", (sid,))
            owners[sid] = rows[0][0] if rows else None
        return owners[sid]

    def edit(record: dict[str, Any]) -> dict[str, Any] | None:
        fields, row = record.get("session"), record.get("row")
        if not isinstance(fields, dict) or not isinstance(row, list) or len(row) < 5:
            return record
        sid = str(fields.get("id"))
        attributes = fields.get("attributes")
        if user is not None:
            who = attributes.get("user_id") if isinstance(attributes, dict) else (
                None if "attributes" in fields else owner(sid))
            if who != user:
                return record
        content = row[1] if isinstance(row[1], str) else ""
        if _mentions(needle, content, row[4] if isinstance(row[4], str) else None):
            return None
        title = fields.get("title")
        if isinstance(title, str) and needle in squash(title):
            return {**record, "session": {**fields, "title": None}}
        return record

    def preview(record: dict[str, Any]) -> tuple[str, str, str]:
        row = record["row"]
        text = row[1] if isinstance(row[1], str) else ""
        return str(record["session"].get("id")), str(row[0]), " ".join(text.split())[:100]

    def scrub() -> Scrub:  # an unreadable line is matched on its text, whatever its user
        return spool.scrub(edit, wait=0, mentions=lambda text: needle in squash(text),
                           dry_run=dry_run)

    if dry_run or not spool.has_pending():
        done = scrub()
    else:
        # as the spool's consumer: a replay under way stores its messages first (the deletion
        # below then takes them), a later one finds them gone
        with spool.consuming():
            done = scrub()
    aside = [f"message the archive refused ({role}) of session {sid}: {text}"
             for sid, role, text in (preview(r) for r in done.rejected if edit(r) is None)]
    aside += [f"unreadable line of the spool: {' '.join(t.split())[:100]}" for t in done.unreadable]
    return [preview(r) for r in done.removed if edit(r) is None], aside


def json_strings(text: str) -> list[str]:
    """The strings of a JSON text (tool calls) as they were written, not their JSON escapes: a
    line break is whitespace to forget, a backslash or a quote is itself."""
    try:
        return strings(json.loads(text))
    except ValueError:
        return []


def count_messages(archive: SessionArchive, scope: str = "all") -> int:
    """How many messages the archive holds in ``scope`` (what a forget plan is measured
    against)."""
    where, params = _scope_sql(scope)
    rows = archive.db.read("SELECT count(*) FROM messages AS m JOIN sessions AS s "
                           "ON s.num = m.session WHERE 1 = 1" + where, params)
    return int(rows[0][0])


def forget_messages(archive: SessionArchive, subject: str, *, scope: str = "all",
                    dry_run: bool = False) -> ArchiveForget:
    """Delete every message (and clear every title) mentioning ``subject``; see the module doc."""
    _scope_sql(scope)  # a bad scope fails before anything is read

    def tx(con: sqlite3.Connection) -> ArchiveForget:
        found = _find(lambda sql, args: con.execute(sql, args).fetchall(), subject, scope)
        ids = [m[0] for m in found.messages]
        for table, rows in (("facts", [f[0] for f in found.facts]), ("messages", ids)):
            for start in range(0, len(rows), _CHUNK):
                chunk = rows[start:start + _CHUNK]
                con.execute(f"DELETE FROM {table} WHERE id IN ({','.join('?' * len(chunk))})",
                            chunk)
        store = vector_store(archive)
        if archive.backend == "sqlite":  # the kept common words store their text
            forget_words(con, subject)
        if ids:
            store.forgot(con)
            purge_index(archive, con)
        for sid in found.titles:
            con.execute("UPDATE sessions SET title = NULL WHERE id = ?", (sid,))
        # the derivation's last problem may quote the model's answer (doctor shows it)
        problem = store.meta(con, keys=("facts_error",)).get("facts_error")
        if problem and squash(subject) in squash(problem):
            store.set_meta(con, "facts_error", f"{problem[:24]}{_FORGOTTEN_PROBLEM}")
        found.deleted = found.matched
        return found

    if dry_run:  # only read: on either backend, through the archive's read path
        found = _find(archive.db.read, subject, scope)
        found.dry_run = True
        found.pending, found.aside = _scrub_spool(archive, subject, scope, True)
        return found
    pending, aside = _scrub_spool(archive, subject, scope, False)
    done = archive._write(tx)
    done.pending, done.aside = pending, aside
    done.deleted += len(pending) + len(aside)
    if done.deleted:
        purge_wal(archive)
    return done


def purge_index(archive: SessionArchive, con: Any) -> None:
    """In a transaction that deleted messages (SQLite): merge the word indexes' segments, so the
    deleted rows' terms leave them (FTS5 keeps a deleted row's terms in its older segment, next
    to a delete marker, until the segments are merged). ``PRAGMA secure_delete`` (db.py)
    overwrites the freed pages."""
    if archive.backend == "sqlite":
        for table in _WORD_INDEXES:
            con.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")


def purge_wal(archive: SessionArchive) -> None:
    """After such a transaction's commit (SQLite): the WAL, whose older pages still hold the
    deleted text, copied in and truncated; best effort, without waiting for readers."""
    if archive.backend == "sqlite" and not archive.db.purge_wal():
        log.debug("%s: the WAL was not truncated after the deletion (another connection reads "
                  "or writes); a later checkpoint or closing the archive does it", archive.path)


def delete_sessions(archive: SessionArchive, session_id: str, *,
                    chain: bool = False) -> DeletedSessions:
    """Delete a session (with ``chain``: its whole compaction chain) and all its messages.

    Raises :class:`~.errors.SessionNotFoundError` for an unknown id. Sessions left in a chain stay
    consistent: a chain whose first session is deleted is renumbered to its next one, and a parent
    whose compaction child is deleted becomes the chain's visible end again.
    """

    def tx(con: sqlite3.Connection) -> DeletedSessions:
        row = con.execute("SELECT num, chain, parent_session_id FROM sessions WHERE id = ?",
                          (session_id,)).fetchone()
        if row is None:
            raise archive._missing(session_id)
        num, chain_num, parent = row
        if chain:
            victims = con.execute("SELECT num, id FROM sessions WHERE chain = ?",
                                  (chain_num,)).fetchall()
        else:
            victims = [(num, session_id)]
        nums = [v[0] for v in victims]
        marks = ",".join("?" * len(nums))
        count = con.execute(f"SELECT count(*) FROM messages WHERE session IN ({marks})",
                            nums).fetchone()[0]
        con.execute(f"DELETE FROM messages WHERE session IN ({marks})", nums)
        vector_store(archive).forgot(con)
        if count:
            purge_index(archive, con)
        con.execute(f"DELETE FROM sessions WHERE num IN ({marks})", nums)
        if not chain:
            rest = con.execute("SELECT num FROM sessions WHERE chain = ? ORDER BY num",
                               (chain_num,)).fetchall()
            if rest and chain_num == num:
                con.execute("UPDATE sessions SET chain = ? WHERE chain = ?",
                            (rest[0][0], chain_num))
            if parent:
                con.execute(
                    "UPDATE sessions SET superseded = EXISTS (SELECT 1 FROM sessions AS c "
                    "WHERE c.parent_session_id = sessions.id AND c.origin = 'compression') "
                    "WHERE id = ?", (parent,))
        for _num, sid in victims:
            archive._nums.pop(sid, None)
        return DeletedSessions([v[1] for v in victims], int(count))

    deleted = archive._write(tx)
    purge_wal(archive)
    return deleted


class LateForgets:
    """The marks of the conversations of one archive, and the check after each write."""

    def __init__(self, erasures: ErasureLog) -> None:
        self.erasures = erasures
        self._marks: dict[str, int] = {}
        self._lock = threading.Lock()

    def mark(self) -> int | None:
        """The settled mark now (read before a history is loaded); None when unreadable."""
        try:
            return self.erasures.settled()
        except Exception as exc:
            log.error("cannot read the erasure log (%s): a forget landing during this "
                      "conversation's turns may leave an archived copy", exc)
            return None

    def loaded(self, session_id: str, mark: int | None) -> None:
        """The session's history was loaded after ``mark`` was read (or it starts empty)."""
        if mark is None:
            return
        with self._lock:
            self._marks[session_id] = mark

    def inherit(self, new_id: str, old_id: str | None) -> None:
        """A session continuing another (a compaction's child) keeps the older mark."""
        with self._lock:
            if new_id in self._marks:
                return
            old = self._marks.get(old_id) if old_id is not None else None
        self.loaded(new_id, old if old is not None else self.mark())

    def ended(self, session_id: str) -> None:
        with self._lock:
            self._marks.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._marks)

    def after_write(self, archive: SessionArchive, session: Session, message: Message) -> int:
        """Re-apply to ``message`` (stored just now) the forgets noted after its session's mark;
        returns how many archived items were deleted again."""
        with self._lock:
            mark = self._marks.get(session.id)
        if mark is None:
            return 0
        notes = self.erasures.since(mark)
        if not notes:
            return 0
        texts = [message.content if isinstance(message.content, str) else str(message.content)]
        for c in message.tool_calls or ():
            arguments = json.dumps(c.arguments, ensure_ascii=False)
            texts += [f"{c.name} {arguments}", *json_strings(arguments)]
        deleted = 0
        for note in notes:
            if note.what != "forget":
                continue
            if note.scope.startswith("user:") and note.scope[5:] != (session.user_id or ""):
                continue
            subject = note.find_in(*texts)
            if subject is None:
                continue
            found = forget_messages(archive, subject, scope=note.scope)
            deleted += found.deleted
            log.info("session %s: a message written after a forget mentioned its subject; "
                     "forgotten again (%d item(s))", session.id, found.deleted)
        return deleted
