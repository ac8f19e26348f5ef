"""The background worker: one daemon thread per conversation, running memory work in FIFO order.

``sync_turn``, ``queue_prefetch``, ``on_session_switch`` and ``on_session_end`` run here, off the
turn's thread, so a slow provider (Hermes once waited ~300 s on one) never holds a reply. One
thread per conversation, first in first out, gives the ordering providers rely on: turn N's sync
lands before turn N+1's, and a session switch runs after the syncs queued before it.

Shutdown drains with a bound (``memory.worker_drain_timeout``), both when the agent closes and at
interpreter exit (an ``atexit`` hook covers every live worker). Hermes waited 5 s and then dropped
whatever was queued, writes included, without saying which. Here, at drain:

* queued ``prefetch`` tasks are dropped first: they only prepare a next turn that will not come,
  and they must not eat the writes' time;
* writes and session boundaries then get the whole bound;
* anything still not run when the bound passes is logged at ERROR level, task by task, with the
  provider hooks it would have called, and returned in :class:`DrainReport`.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import itertools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DrainReport", "SessionWorker", "TaskKind", "drain_all"]

log = logging.getLogger("hermes_core.worker")

TaskKind = Literal["write", "prefetch", "boundary"]
DrainStatus = Literal["idle", "drained", "timed_out"]

_names = itertools.count(1)
_live: weakref.WeakSet[SessionWorker] = weakref.WeakSet()
_live_lock = threading.Lock()


@dataclass(slots=True)
class _Task:
    label: str
    fn: Callable[[], object]
    kind: TaskKind
    seq: int


@dataclass(slots=True)
class DrainReport:
    """How a drain went."""

    status: DrainStatus
    seconds: float = 0.0
    #: labels of queued prefetch tasks dropped because the conversation is over
    skipped_prefetch: list[str] = field(default_factory=list)
    #: labels of writes/boundaries that did not run (or did not finish) within the bound
    abandoned: list[str] = field(default_factory=list)


class SessionWorker:
    """A FIFO queue of tasks served by one daemon thread, started on the first task."""

    def __init__(self, name: str | None = None, *, drain_timeout: float = 10.0) -> None:
        self.name = name or f"hermes-memory-{next(_names)}"
        self.drain_timeout = drain_timeout
        self._cond = threading.Condition()
        self._tasks: deque[_Task] = deque()
        self._running: _Task | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._seq = 0  # sequence number of the last task submitted
        self._done = 0  # highest sequence number finished (run, dropped or abandoned)
        self.completed = 0
        self.failed = 0
        with _live_lock:
            _live.add(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def pending(self) -> list[str]:
        """Labels of the task running now and those queued, in order."""
        with self._cond:
            running = [self._running.label] if self._running else []
            return running + [t.label for t in self._tasks]

    def submit(self, label: str, fn: Callable[[], object], *, kind: TaskKind = "write") -> bool:
        """Queue ``fn``; False (and a warning) if the worker is already shut down."""
        with self._cond:
            if self._closed:
                log.warning("%s: %r arrived after shutdown and was not run", self.name, label)
                return False
            self._seq += 1
            # the task runs in the submitter's context (e.g. a clock pinned by a harness)
            self._tasks.append(_Task(label, functools.partial(contextvars.copy_context().run, fn),
                                     kind, self._seq))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return True

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._tasks and not self._closed:
                    self._cond.wait()
                if not self._tasks:
                    return
                task = self._running = self._tasks.popleft()
            try:
                task.fn()
            except Exception:
                # tasks isolate each plugin call themselves; this catches kernel bugs
                self.failed += 1
                log.exception("%s: task %r failed", self.name, task.label)
            with self._cond:
                self._running = None
                self.completed += 1
                self._done = max(self._done, task.seq)
                self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every task submitted so far has run; False if ``timeout`` passed first."""
        with self._cond:
            target = self._seq
            return self._cond.wait_for(lambda: self._done >= target, timeout)

    def drain(self, timeout: float | None = None) -> DrainReport:
        """Stop accepting tasks, run what is queued within ``timeout`` seconds, report the rest.

        ``timeout`` defaults to :attr:`drain_timeout`. Safe to call more than once.
        """
        bound = self.drain_timeout if timeout is None else timeout
        start = time.perf_counter()
        with self._cond:
            already = self._closed
            self._closed = True
            skipped = [t.label for t in self._tasks if t.kind == "prefetch"]
            self._tasks = deque(t for t in self._tasks if t.kind != "prefetch")
            self._cond.notify_all()
            busy = bool(self._tasks) or self._running is not None
            finished = self._cond.wait_for(
                lambda: not self._tasks and self._running is None, bound
            )
            abandoned = ([self._running.label] if self._running else []) + [
                t.label for t in self._tasks
            ]
            if self._tasks:
                self._done = max(self._done, self._tasks[-1].seq)
            self._tasks.clear()
            self._cond.notify_all()
        seconds = time.perf_counter() - start
        if abandoned:
            log.error(
                "%s: %d memory task(s) did not finish within the %.1f s shutdown bound "
                "(memory.worker_drain_timeout) and may not be stored: %s",
                self.name, len(abandoned), bound, "; ".join(abandoned),
            )
        if skipped and not already:
            log.debug("%s: dropped %d queued prefetch task(s) at shutdown", self.name, len(skipped))
        status: DrainStatus = "timed_out" if not finished else ("drained" if busy else "idle")
        return DrainReport(status, seconds, skipped, abandoned)


def drain_all(timeout: float | None = None) -> list[DrainReport]:
    """Drain every live worker, sharing one deadline (the longest of their bounds by default)."""
    with _live_lock:
        workers = [w for w in _live if not w.closed]
    if not workers:
        return []
    bound = timeout if timeout is not None else max(w.drain_timeout for w in workers)
    deadline = time.perf_counter() + bound
    return [w.drain(max(0.0, deadline - time.perf_counter())) for w in workers]


@atexit.register
def _drain_at_exit() -> None:
    # Daemon threads are killed when the interpreter ends; queued writes would vanish silently.
    drain_all()
