"""Recall for prefetch: prepared in the background, served from memory within the deadline.

The kernel gives ``prefetch`` 0.3 s (``memory.prefetch_timeout``) and calls ``queue_prefetch`` after
each turn with that turn's user text. :class:`Prefetcher` runs recalls on the provider's
disposable lane for the conversation (``PluginContext.run_later(..., kind="disposable")``: the
kernel's shutdown drops the queued ones and does not wait for a running one) and keeps, per
session, the last finished one (:class:`Prepared`). ``prefetch`` then:

1. serves the prepared recall at once when it answered this very query;
2. otherwise (a new topic, or the first turn of a session, when nothing was prepared) starts a
   recall for the actual query, or joins one already running, and waits at most
   ``prefetch_live_wait`` (kept below the kernel's deadline). A local server answers in tens of
   milliseconds, so this usually succeeds; the fresh memories come first, the prepared ones fill
   the rest;
3. a recall that misses the wait is not wasted: when it finishes it becomes the session's prepared
   recall, for the next turn.

After a failure caused by the server being unreachable, live waits are skipped for a few seconds,
so an outage costs a turn nothing at all.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hermes_core.types import Session

from .client import HindsightUnavailable, Memory, has_words

__all__ = ["Prefetcher", "Prepared", "render"]

#: seconds after an unreachable server during which prefetch does not wait for a live recall
OUTAGE_COOLDOWN = 5.0
#: recalls allowed in flight at once; beyond this a prefetch serves what is prepared
MAX_IN_FLIGHT = 4


@dataclass(frozen=True, slots=True)
class Prepared:
    """A finished recall for one session."""

    query: str
    memories: tuple[Memory, ...]


class Prefetcher:
    """Background recalls keyed by session; see the module docstring."""

    def __init__(self, fetch: Callable[[str, Session], list[Memory]], *,
                 logger: logging.Logger, run_later: Callable[..., bool]) -> None:
        self._fetch = fetch
        self._log = logger
        self._run_later = run_later
        self._lock = threading.Lock()
        self._prepared: dict[str, Prepared] = {}
        self._in_flight: dict[tuple[str, str], cf.Future[list[Memory]]] = {}
        self._outage_until = 0.0
        self._closed = False

    def queue(self, query: str, session: Session) -> cf.Future[list[Memory]] | None:
        """Start (or join) a recall of ``query`` for ``session``; ``None`` when none can start."""
        if not has_words(query):
            return None
        key = (session.id, query)
        with self._lock:
            if self._closed:
                return None
            running = self._in_flight.get(key)
            if running is not None:
                return running
            if len(self._in_flight) >= MAX_IN_FLIGHT:
                return None
            future: cf.Future[list[Memory]] = cf.Future()
            self._in_flight[key] = future
        future.add_done_callback(lambda f: self._finished(key, f))
        if not self._run_later(lambda: self._run(future, query, session), "hindsight: recall",
                               kind="disposable", session=session):
            future.cancel()  # the host is closing
            return None
        return future

    def _run(self, future: cf.Future[list[Memory]], query: str, session: Session) -> None:
        """One recall, on the disposable lane; its outcome goes to ``future``."""
        if not future.set_running_or_notify_cancel():
            return  # cancelled by close() before it started
        try:
            future.set_result(self._fetch(query, session))
        except Exception as exc:  # reported by _finished
            future.set_exception(exc)

    def _finished(self, key: tuple[str, str], future: cf.Future[list[Memory]]) -> None:
        session_id, query = key
        with self._lock:
            self._in_flight.pop(key, None)
            if future.cancelled():
                return
            error = future.exception()
            if error is None:
                self._prepared[session_id] = Prepared(query, tuple(future.result()))
                return
            if isinstance(error, HindsightUnavailable):
                self._outage_until = time.monotonic() + OUTAGE_COOLDOWN
            if self._closed:
                return  # shutting down: a recall cut short is expected, not news
        # Unreachable servers are expected (laptop offline): info, not a warning per turn.
        level = logging.INFO if isinstance(error, HindsightUnavailable) else logging.WARNING
        self._log.log(level, "hindsight: recall failed: %s", error)

    def get(self, query: str, session: Session, *, wait: float) -> list[Memory]:
        """The memories to add to ``query``'s message, waiting at most ``wait`` seconds."""
        with self._lock:
            prepared = self._prepared.get(session.id)
            running = self._in_flight.get((session.id, query))
            outage = time.monotonic() < self._outage_until
        if prepared is not None and prepared.query == query:
            return list(prepared.memories)
        older = list(prepared.memories) if prepared is not None else []
        if wait <= 0 or (outage and running is None):
            return older
        future = running or self.queue(query, session)
        if future is None:
            return older
        try:
            fresh = future.result(timeout=wait)
        except Exception:  # not in time, cancelled, or failed (logged by _finished)
            return older
        return merge(fresh, older)

    def drop(self, session_id: str) -> None:
        """Forget the prepared recall of a session that is no longer active."""
        with self._lock:
            self._prepared.pop(session_id, None)

    def idle(self, timeout: float) -> bool:
        """Wait until no recall is running; ``False`` if one still is after ``timeout``."""
        end = time.monotonic() + timeout
        while True:
            with self._lock:
                running = list(self._in_flight.values())
            if not running:
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            cf.wait(running, timeout=left)

    def close(self) -> None:
        """Cancel the recalls not started; one still running is the kernel's to abandon."""
        with self._lock:
            self._closed = True
            waiting = list(self._in_flight.values())
        for future in waiting:
            future.cancel()


def merge(first: Iterable[Memory], second: Iterable[Memory]) -> list[Memory]:
    """``first`` then ``second``, without repeating a memory (by id or by text)."""
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    out = []
    for memory in (*first, *second):
        text = " ".join(memory.text.split()).lower()
        if memory.id in seen_ids or text in seen_texts:
            continue
        seen_ids.add(memory.id)
        seen_texts.add(text)
        out.append(memory)
    return out


def render(memories: Iterable[Memory], *, bank: str, max_results: int, max_chars: int,
           skip_session: str | None = None) -> str | None:
    """The text prefetch returns: a heading and one line per memory, within ``max_chars``.

    Memories of ``skip_session`` (already in the conversation) are left out; duplicates (an
    observation repeating a fact) are shown once. ``None`` when nothing is left.
    """
    heading = f"Memories recalled from earlier conversations (Hindsight bank {bank!r}):"
    lines: list[str] = []
    size = len(heading)
    for memory in merge(memories, ()):
        if skip_session is not None and (memory.document_id == skip_session
                                         or f"session:{skip_session}" in memory.tags):
            continue
        text = " ".join(memory.text.split())
        when = (memory.occurred_start or memory.mentioned_at or "")[:10]
        label = ", ".join(part for part in (memory.type, when) if part)
        line = f"- {text}" + (f" [{label}]" if label else "")
        room = max_chars - size - 1
        if len(line) > room:
            if room < 40 or lines:
                break
            line = line[: room - 1] + "…"
        lines.append(line)
        size += len(line) + 1
        if len(lines) >= max_results:
            break
    if not lines:
        return None
    return "\n".join([heading, *lines])
