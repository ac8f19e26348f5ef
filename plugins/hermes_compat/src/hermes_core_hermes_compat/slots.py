"""One Hermes provider object as the adapter holds it: :class:`Slot` and its :class:`Failure`.

The adapter (:mod:`.adapter_memory`) keeps one slot per user key for the user's own sessions, and
one per running child session of a delegation (``agent_context`` ``"subagent"``), so a child never
moves the parent's object to another session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from hermes_core.types import Message

from . import calls
from .turn_ends import trim

__all__ = ["RETRY_MAX_SECONDS", "RETRY_SECONDS", "Failure", "Slot"]

#: seconds before a failed ``initialize`` is tried again in the same session (doubling)
RETRY_SECONDS = 30.0
RETRY_MAX_SECONDS = 900.0


class Failure:
    """The last failed ``initialize`` of a slot: for which session, and when to try again."""

    __slots__ = ("count", "message", "retry_at", "session_id")

    def __init__(self, session_id: str, message: str, count: int) -> None:
        self.session_id = session_id
        self.message = message
        self.count = count
        wait = min(RETRY_SECONDS * 2 ** (count - 1), RETRY_MAX_SECONDS)
        self.retry_at = time.monotonic() + wait

    def holds(self, session_id: str) -> bool:
        """Whether ``session_id``'s hooks are still to be skipped."""
        return session_id == self.session_id and time.monotonic() < self.retry_at


class Slot:
    """One Hermes provider object, its own thread, and the session it is initialised for (the
    hooks and tools registered beside it are the adapter's, the same for every slot)."""

    __slots__ = ("agent_context", "began", "block", "compacted", "ending", "failure",
                 "hermes_home", "histories", "lock", "obj", "pinned", "session_id", "turns",
                 "warm", "warming", "whole")

    def __init__(self, obj: Any, hermes_home: Path, thread_name: str,
                 agent_context: str = "primary") -> None:
        self.obj = obj
        #: ``"primary"`` (the user's sessions) or ``"subagent"`` (one delegated child session)
        self.agent_context = agent_context
        #: session id -> its messages as Hermes hooks see them (kept only for ``pre_llm_call`` and
        #: ``post_llm_call``), see :meth:`remember`; ``whole``: session id -> whether its list
        #: holds every message since the session began (not only this process's, after a
        #: resume), for the sessions whose start (their switch) the object has seen
        self.histories: dict[str, list[Message]] = {}
        self.whole: dict[str, bool] = {}
        self.hermes_home = hermes_home
        self.session_id: str | None = None
        #: session id -> its user turns so far (Hermes' ``turn_number``), see :meth:`turns_of`
        self.turns: dict[str, int] = {}
        #: a delegated child's first message was seen (its ``subagent_start`` fired)
        self.began = False
        #: the object's last ``system_prompt_block()`` answer
        self.block: str | None = None
        #: session id -> the OpenAI-style history a compaction is about to summarise
        self.compacted: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.RLock()
        self.pinned = calls.Pinned(thread_name, hermes_home)
        self.failure: Failure | None = None
        #: a prefetch has answered once (the object's first, cold call is behind it)
        self.warm = False
        #: the cold first prefetch, still running on the object's thread after the turn left it
        self.warming: Future[Any] | None = None
        #: the last turn end handed to the object's thread from a turn (see ``_end_now``)
        self.ending: Future[Any] | None = None

    def turns_of(self, session_id: str, parent_session_id: str | None = None) -> int:
        """The user turns of a session so far. Counted per session, so a new session (``/new``)
        starts at 0 whether or not its switch has reached the object yet, as Hermes resets its
        count at once; a compaction's child goes on from its parent's count."""
        if session_id not in self.turns:
            self.turns[session_id] = self.turns.get(parent_session_id or "", 0)
            trim(self.turns, 8)  # the sessions of long ago
        return self.turns[session_id]

    def remember(self, session_id: str, message: Message) -> None:
        """Add ``message`` to ``session_id``'s history (a compaction's child begins with the
        messages it carries, so it holds them all from its start)."""
        if session_id not in self.histories:
            self.histories[session_id] = []
            if "carried_over" in message.meta:  # a compaction's child
                self.start_seen(session_id, whole=True)
            trim(self.histories, 4)  # the sessions of long ago
        self.histories[session_id].append(message)

    def start_seen(self, session_id: str, *, whole: bool) -> None:
        """``session_id`` has begun here; ``whole``: as a new session, every message of which
        reaches :meth:`remember` (a resumed one has older messages this process never saw)."""
        self.whole[session_id] = self.whole.get(session_id, False) or whole
        trim(self.whole, 8)

    def caught_up(self, session_id: str, stored: list[Message]) -> None:
        """``stored`` is the session's whole history as the kernel stored it at a turn's end
        (after a resume it holds what this process never saw): the session's list becomes it,
        and the messages seen since that turn ended."""
        mine = self.histories.get(session_id)
        if mine is None or not stored:
            return
        last = next((i for i in range(len(mine) - 1, -1, -1) if mine[i] is stored[-1]), None)
        if last is not None:
            self.histories[session_id] = [*stored, *mine[last + 1:]]
            self.start_seen(session_id, whole=True)

    def call(self, fn: Callable[..., calls.T], /, *args: Any, **kwargs: Any) -> calls.T:
        """``fn(*args, **kwargs)`` on this object's thread, in its Hermes home."""
        return self.pinned.run(fn, *args, **kwargs)
