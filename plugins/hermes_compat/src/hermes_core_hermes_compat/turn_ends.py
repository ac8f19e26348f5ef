"""Which turn a Hermes turn-end belongs to, and whether it may fire before its turn returns.

Hermes fires a turn's ``post_llm_call`` and per-turn ``on_session_end`` on the turn's own thread
as ``run_conversation`` ends, so a plugin sees every turn's end before anything of the next turn,
and the ends in turn order. The bridge fires them from the model's last reply of the turn (the
kernel's ``on_message``, on the turn's thread) when it can, and otherwise from the kernel's
``sync_turn`` or ``on_turn_cancelled`` on the background lane: a cancelled turn, a turn that spent
its budget on tool calls, a turn whose history the bridge does not hold whole yet. :class:`TurnBook`
keeps what that needs, so that the ends stay in turn order whichever way each one comes: a turn's
end fires early only when no earlier turn of its conversation still has its end to come from the
lane; otherwise it is left to the lane too, behind the earlier one.

A turn whose model call failed never ends (as in Hermes: no hook fires for it); the lane's next
turn end of its session forgets it.
"""

from __future__ import annotations

import threading
from typing import Any

from hermes_core.types import Message, Session

__all__ = ["TurnBook", "trim"]

#: turns remembered at most (turns that never ended: their model call failed, or a closing host
#: dropped their sync_turn)
_KEEP = 64


class TurnBook:
    """The turns of one Hermes plugin's provider instance, by user message. ``lock`` guards it
    (``switched`` is a condition over the same lock, for the adapter's wait for a session's
    switch); methods named "(locked)" expect the caller to hold it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.switched = threading.Condition(self.lock)
        #: session id -> its user message that has not reached ``prefetch`` yet
        self._asked: dict[str, Message] = {}
        #: id of a user message -> (it, what Hermes passes about its turn), taken at its start
        self._ids: dict[int, tuple[Message, dict[str, Any]]] = {}
        #: session id -> the user message of its turn in progress (no end fired or expected yet)
        self._pending: dict[str, Message] = {}
        #: id of a user message -> it, whose end fired from its reply (its sync_turn fires none)
        self._early: dict[int, Message] = {}
        #: id of a user message -> (its session, that session's parent, it): its end is to come
        #: from the lane (or never: its model call failed)
        self._behind: dict[int, tuple[str, str | None, Message]] = {}

    def asked(self, session_id: str, message: Message) -> None:
        """A user message of ``session_id`` (its turn's identity is taken in ``prefetch``)."""
        self._asked[session_id] = message

    def forget(self, session_id: str) -> None:
        """The session ended: a last message whose prefetch never came is forgotten."""
        self._asked.pop(session_id, None)

    def started(self, session: Session, query: str, turn: dict[str, Any]) -> None:
        """The turn of ``query`` began (its prefetch) with identity ``turn``. A turn of the
        session still in progress never ended on its reply: its end comes from the lane (a
        cancelled turn, a spent budget) or never (a failed model call)."""
        asked = self._asked.pop(session.id, None)
        if asked is None or asked.content != query:
            return
        with self.lock:
            self._ids[id(asked)] = (asked, turn)
            trim(self._ids, 16)
            for sid in (session.id, session.parent_session_id):
                if not sid:
                    continue
                prior = self._pending.pop(sid, None)
                if prior is not None and prior is not asked:
                    self._lag(prior, sid, session.parent_session_id if sid == session.id else None)
            self._pending[session.id] = asked
            trim(self._pending, 16)

    def claim(self, session: Session) -> Message | None:
        """(locked) The user message of ``session``'s turn, taken for an end fired from its
        reply (a compaction during the turn moved it to a child session); None when its start
        was not seen, or when an earlier turn's end is still to come from the lane: then this
        one's comes from there as well, after it."""
        user = self._pending.pop(session.id, None)
        if user is None and session.parent_session_id:
            user = self._pending.pop(session.parent_session_id, None)
        if user is not None and any(sid in (session.id, session.parent_session_id)
                                    for sid, _parent, _user in self._behind.values()):
            self.lag(user, session)
            return None
        return user

    def lag(self, user: Message, session: Session) -> None:
        """(locked) ``user``'s turn ends from the lane: no later turn's end may overtake it."""
        self._lag(user, session.id, session.parent_session_id)

    def _lag(self, user: Message, session_id: str, parent: str | None) -> None:
        self._behind[id(user)] = (session_id, parent, user)
        trim(self._behind, _KEEP)

    def fired(self, user: Message) -> None:
        """(locked) ``user``'s turn ended from its reply."""
        self._early[id(user)] = user
        trim(self._early, _KEEP)

    def fired_early(self, user: Message) -> bool:
        """Whether ``user``'s turn ended from its reply (asked once, by its ``sync_turn``)."""
        with self.lock:
            return self._early.pop(id(user), None) is user

    def identity(self, user: Message) -> dict[str, Any] | None:
        """What Hermes passes about ``user``'s turn, taken when it began (once), or None."""
        with self.lock:
            taken = self._ids.pop(id(user), None)
        return taken[1] if taken is not None and taken[0] is user else None

    def landed(self, user: Message, session: Session) -> None:
        """The lane fired ``user``'s turn end (after the call returned, so a later turn's early
        end comes after it): the turn is done, and so are the earlier turns of its session whose
        end never comes (their model call failed)."""
        with self.lock:
            for sid in (session.id, session.parent_session_id):
                if sid is not None and self._pending.get(sid) is user:
                    del self._pending[sid]
            entry = self._behind.get(id(user))
            if entry is None or entry[2] is not user:
                return
            group = {entry[0], entry[1]} - {None}
            for key in list(self._behind):
                if self._behind[key][0] in group:
                    del self._behind[key]
                if key == id(user):
                    break


def trim(table: dict[Any, Any], keep: int) -> None:
    """Forget all but the ``keep`` newest entries of ``table`` (insertion order)."""
    for old in list(table)[:-keep]:
        table.pop(old, None)
