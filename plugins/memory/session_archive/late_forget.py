"""A forget that lands while a turn is in flight: its archived copy is removed when it is written.

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
import threading
from typing import TYPE_CHECKING

from hermes_core.storage.erasure_log import ErasureLog
from hermes_core.types import Message, Session

if TYPE_CHECKING:
    from .store import SessionArchive

__all__ = ["LateForgets"]

log = logging.getLogger("hermes_core.session_archive")


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
        from .forget import forget_messages

        texts = [message.content if isinstance(message.content, str) else str(message.content)]
        texts += [f"{c.name} {json.dumps(c.arguments, ensure_ascii=False)}"
                  for c in message.tool_calls or ()]
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
