"""Lanes: daemon threads per plugin and purpose, so a plugin call can be bounded by a deadline.

Python cannot stop a function that hangs; it can only stop *waiting* for it. A lane is a FIFO of
calls into one plugin served by its own daemon thread. The caller hands a call to the lane and
waits at most the deadline:

* the call finishes in time: its value (or the exception it raised) comes back;
* the deadline passes: the caller goes on with ``timed_out``; the call keeps running on the lane and
  its side effects still land (an archive write is late, never lost);
* the lane is still busy with an earlier late call: the new call is queued behind it and the caller
  does not wait at all (``queued``). A hung plugin so costs a caller one deadline, not one per call,
  and its calls still run in the order they were made;
* the lane was late before and is idle again: the caller waits only a short probe
  (:data:`PROBE_SECONDS`, or 5 % of the deadline); a call that answers within it makes the lane
  trusted again (full deadlines), so a plugin that is slow every time costs one deadline, not one
  per call.

A hook call whose plugins are all idle and trusted does not need one hand-off per plugin: the
caller *claims* their lanes (:meth:`Lane.try_claim`) and hands the whole call to one thread of the
:class:`Runners` pool. A claimed lane holds the calls made to it meanwhile and runs them, in order,
once the claim is released, so a plugin still sees one call at a time per lane.

A plugin has up to :data:`SHARDS` lanes per purpose: the calls of one conversation always go to
the same lane (:func:`shard_of` its key), so they run one at a time and in order, while different
conversations' calls run side by side (a server's turns do not queue behind one plugin thread). A
plugin that hangs on one conversation holds that lane only. Trust is the plugin's, not the
lane's: once one of its lanes is late, a call on any other of its lanes is only probed until one
answers in time, so a hung plugin still costs one deadline, not one per conversation. Calls that
name no conversation share shard 0.

Late results are discarded (their errors are logged). :meth:`LaneSet.drain` waits for every lane's
backlog within a bound at shutdown and reports what did not finish.

Lanes of the purpose :data:`DISPOSABLE` hold work a plugin prepares for later and may lose (a
recall for the next turn): :meth:`LaneSet.drain` waits for none of it. It drops what is queued
there and leaves a call still running to finish (or hang) on its daemon thread, logging both as
abandoned, not as failures. Such a lane keeps at most :data:`DISPOSABLE_QUEUE` calls waiting:
behind a call that hangs, a newer one drops the oldest waiting (a recall prepared for a turn long
gone), so a plugin that keeps queueing behind its own hung call holds a bounded amount of memory.

A call nobody waits for (``host.hooks.later``) is :meth:`Lane.submit`-ted and counted on its
conversation's :class:`~._backlog.Backlog`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["DISPOSABLE", "DISPOSABLE_QUEUE", "SHARDS", "CallResult", "Lane", "LaneSet", "Runners", "Status",
           "run_bounded", "run_here", "shard_of"]

log = logging.getLogger("hermes_core.lanes")

Status = Literal["ok", "error", "timed_out", "queued"]

@dataclass(slots=True)
class CallResult:
    """How one call on a lane went."""

    status: Status
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


#: how long a caller waits for a lane that was late before, until it answers in time again
PROBE_SECONDS = 0.05

#: lanes per plugin and purpose; a conversation's calls all go to one of them
SHARDS = 8

#: the purpose of lanes whose work a drain drops when queued and does not wait for when running
DISPOSABLE = "disposable"

#: calls a :data:`DISPOSABLE` lane keeps waiting (not started); a newer call drops the oldest
DISPOSABLE_QUEUE = 32


def shard_of(key: str | None, shards: int = SHARDS) -> int:
    """The lane shard of a conversation key (stable across processes; 0 for no key)."""
    if not key or shards <= 1:
        return 0
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % shards


class _Job:
    __slots__ = ("abandoned", "dropped", "fn", "label", "reply")

    def __init__(self, fn: Callable[[], Any], label: str, wait: bool) -> None:
        self.fn = fn
        self.label = label
        self.dropped = False  # a DISPOSABLE lane's newer call took its place: it never runs
        self.reply: queue.SimpleQueue[CallResult] | None = queue.SimpleQueue() if wait else None
        self.abandoned = not wait  # nobody reads the result


class _Trust:
    """Whether a plugin's lanes for one purpose are late (shared by its shards)."""

    __slots__ = ("late",)

    def __init__(self) -> None:
        self.late = False


class Lane:
    """A FIFO of calls served by one daemon thread, started on first use."""

    def __init__(self, name: str, trust: _Trust | None = None, *, disposable: bool = False) -> None:
        self.name = name
        #: a :data:`DISPOSABLE` lane: :meth:`LaneSet.drain` discards it instead of waiting
        self.disposable = disposable
        #: :meth:`discard` was called: the calls not started yet are dropped
        self.discarded = False
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._backlog = 0  # calls submitted and not finished
        self._late = False  # the caller stopped waiting for a call still on this lane
        #: the plugin's trust, shared with its other lanes for the same purpose
        self._trust = trust or _Trust()
        self._thread: threading.Thread | None = None
        self._running: str | None = None
        self._stopped = False
        self._ident: int | None = None
        #: the label of the call a claim runs elsewhere; jobs submitted meanwhile wait in _held
        self._claim: str | None = None
        self._held: list[_Job] = []
        #: a disposable lane's calls not started yet, oldest first (see DISPOSABLE_QUEUE)
        self._waiting: deque[_Job] = deque()

    @property
    def backlog(self) -> int:
        return self._backlog

    def running(self) -> str | None:
        """The label of the call on the lane now (or running elsewhere under a claim), if any."""
        return self._running or self._claim

    def try_claim(self, label: str) -> bool:
        """Reserve an idle, trusted lane for one call that the claimer runs on another thread.

        Until :meth:`release`, calls submitted to the lane are held and then run in order, so the
        plugin still sees one call at a time on this lane. False (nothing reserved) when the lane
        is busy, late or closed.
        """
        with self._lock:
            if (self._stopped or self._late or self._trust.late or self._backlog
                    or self._claim is not None):
                return False
            self._claim = label
            self._backlog += 1
            return True

    def mark_late(self) -> None:
        """The claimer stopped waiting for the claimed call: later calls are queued or probed."""
        with self._lock:
            self._late = self._trust.late = True

    def claim_is_clear(self) -> bool:
        """Whether the lane is claimed with no call held behind the claim (and is trusted), so
        the claimer may run one more call of it under the same claim, ahead of later ones."""
        with self._lock:
            return (self._claim is not None and not self._held and not self._stopped
                    and not self._late and not self._trust.late)

    def release(self, first: Sequence[Callable[[], Any]] = ()) -> None:
        """End a claim: the held calls go to the lane's thread, in the order they came, after
        ``first`` (claimed calls the claimer did not run, in their order)."""
        with self._lock:
            if self._claim is None:
                return
            self._claim = None
            self._backlog -= 1
            held, self._held = self._held, []
            ahead: list[_Job] = []
            for fn in first:
                job = _Job(fn, "claimed call", wait=False)
                job.abandoned = False
                self._backlog += 1
                ahead.append(job)
            for job in ahead + held:
                if self._stopped:
                    self._backlog -= 1
                    if job.reply is not None:
                        job.reply.put(CallResult("error", error=RuntimeError(f"{self.name} is closed")))
                    continue
                if self._thread is None:
                    self._start()
                self._jobs.put(job)
            if self._backlog == 0:
                self._idle.notify_all()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], Any], timeout: float, label: str = "") -> CallResult:
        """Run ``fn`` on the lane; wait at most ``timeout`` seconds for it (see the module doc)."""
        with self._lock:
            if self._stopped:
                return CallResult("error", error=RuntimeError(f"{self.name} is closed"))
            behind_late = self._late and self._backlog > 0
            # once late, the plugin is only probed (a short wait) until a call answers in time again
            probed = self._late or self._trust.late
            wait = min(timeout, max(PROBE_SECONDS, timeout * 0.05)) if probed else timeout
            self._backlog += 1
            job = _Job(fn, label, wait=not behind_late)
            if self._claim is not None:
                self._held.append(job)  # runs once the claimed call is over
            else:
                if self._thread is None:
                    self._start()
                self._jobs.put(job)
        if job.reply is None:
            return CallResult("queued")
        try:
            result = job.reply.get(True, wait)
            if self._late or self._trust.late:
                with self._lock:
                    self._late = self._trust.late = False  # it answered in time: trust it again
            return result
        except queue.Empty:
            with self._lock:  # the lane puts the result under this lock: no race
                # Late either way: a plugin as slow as its deadline is probed from now on, so it
                # costs its callers one deadline, not one per call.
                self._late = self._trust.late = True
                try:
                    return job.reply.get_nowait()  # it finished just now
                except queue.Empty:
                    job.abandoned = True
            return CallResult("timed_out", seconds=wait)

    def submit(self, fn: Callable[[], Any], label: str = "") -> bool:
        """Queue ``fn`` on the lane and return at once; False when the lane is closed. Nobody
        reads the result: ``fn`` reports its own outcome (what it raises is logged)."""
        with self._lock:
            if self._stopped:
                return False
            self._backlog += 1
            job = _Job(fn, label, wait=False)
            job.abandoned = False  # not late: nobody was waiting
            if self.disposable:
                self._bound_waiting(job)
            if self._claim is not None:
                self._held.append(job)
            else:
                if self._thread is None:
                    self._start()
                self._jobs.put(job)
        return True

    def _bound_waiting(self, job: _Job) -> None:
        """Keep ``job`` among a disposable lane's waiting calls, dropping the oldest beyond
        :data:`DISPOSABLE_QUEUE` (called under the lock)."""
        self._waiting.append(job)
        if len(self._waiting) <= DISPOSABLE_QUEUE:
            return
        oldest = self._waiting.popleft()
        oldest.dropped = True
        self._backlog -= 1
        log.info("%s: %s dropped before it ran: %d newer call(s) wait behind %s", self.name,
                 oldest.label, DISPOSABLE_QUEUE, self._running or "a running call")

    def behind_late(self) -> bool:
        """Whether a call queued now would wait behind a call its caller stopped waiting for."""
        with self._lock:
            return self._late and self._backlog > 0

    def trust(self) -> None:
        """A call answered within its deadline: the lane (and the plugin) is trusted again."""
        if self._late or self._trust.late:
            with self._lock:
                self._late = self._trust.late = False

    def owns_current_thread(self) -> bool:
        """Whether the caller runs on this lane (a call from there must run inline)."""
        return self._ident == threading.get_ident()

    def _loop(self) -> None:
        self._ident = threading.get_ident()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            with self._lock:
                if self.discarded or job.dropped:  # dropped (and uncounted) already: never runs
                    continue
                if self._waiting:
                    self._waiting.popleft()  # this job: the dropped ones left from the front
                self._running = job.label
            start = time.perf_counter()
            try:
                result = CallResult("ok", job.fn(), seconds=time.perf_counter() - start)
            except Exception as exc:
                result = CallResult("error", error=exc, seconds=time.perf_counter() - start)
            self._running = None
            with self._lock:
                if job.reply is not None:
                    job.reply.put(result)
                abandoned = job.abandoned
                self._backlog -= 1
                if self._backlog == 0:
                    self._idle.notify_all()
            if job.reply is None and result.error is not None and not abandoned:
                log.error("%s: %s raised %s: %s", self.name, job.label,
                          type(result.error).__name__, result.error)
            if abandoned:
                if result.error is not None:
                    log.error("%s: %s raised %s after its caller stopped waiting: %s", self.name,
                              job.label, type(result.error).__name__, result.error)
                else:
                    log.info("%s: %s finished late (%.2f s)", self.name, job.label, result.seconds)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or running; False if ``timeout`` passed first."""
        with self._lock:
            return self._idle.wait_for(lambda: self._backlog == 0, timeout)

    def discard(self) -> tuple[str | None, int]:
        """Close the lane without waiting: the calls not started are dropped (its thread skips
        them), a running one finishes (or hangs) on the daemon thread. Returns the running call's
        label and how many were dropped. For lanes nobody claims or waits on (submit only)."""
        with self._lock:
            running, self.discarded = self._running, True
            dropped = self._backlog - (running is not None)
            self._backlog -= dropped
            if self._thread is not None and not self._stopped:
                self._jobs.put(None)
            self._stopped = True
        return running, dropped

    def stop(self) -> None:
        """Let the thread end after the calls queued so far (a hung call keeps it, as a daemon)."""
        with self._lock:
            if self._thread is not None and not self._stopped:
                self._jobs.put(None)
            self._stopped = True


class LaneSet:
    """Lanes by key (plugin, purpose and shard), created on first use."""

    def __init__(self, prefix: str = "hermes-lane", shards: int = SHARDS) -> None:
        self._prefix = prefix
        self.shards = max(1, shards)
        self._lanes: dict[tuple[str, str, int], Lane] = {}
        self._trust: dict[tuple[str, str], _Trust] = {}
        self._lock = threading.Lock()
        #: threads that run whole hook calls over claimed lanes
        self.runners = Runners(f"{prefix}-runner")

    def get(self, plugin: str, purpose: str, shard: int = 0) -> Lane:
        """The lane of a plugin for a purpose and shard (its thread:
        ``<prefix>-<purpose>-<plugin>[-<shard>]``)."""
        key = (plugin, purpose, shard)
        lane = self._lanes.get(key)
        if lane is None:
            with self._lock:
                lane = self._lanes.get(key)
                if lane is None:
                    name = f"{self._prefix}-{purpose}-{plugin}" + (f"-{shard}" if shard else "")
                    trust = self._trust.setdefault((plugin, purpose), _Trust())
                    lane = self._lanes[key] = Lane(name, trust, disposable=purpose == DISPOSABLE)
        return lane

    def busy(self) -> list[str]:
        """Labels of lanes with calls queued or running (:data:`DISPOSABLE` lanes left out)."""
        return [f"{lane.name} ({lane.running() or 'queued'}, {lane.backlog} call(s))"
                for lane in list(self._lanes.values()) if lane.backlog and not lane.disposable]

    def drain(self, timeout: float) -> list[str]:
        """Discard the :data:`DISPOSABLE` lanes (see the module doc), then wait up to ``timeout``
        seconds in all for every other lane to finish; return what did not."""
        deadline = time.monotonic() + timeout
        lanes = list(self._lanes.values())
        discarded = [(lane.name, *lane.discard()) for lane in lanes
                     if lane.disposable and not lane.discarded]
        abandoned = [f"{name} ({running})" for name, running, _ in discarded if running]
        dropped = sum(n for _, _, n in discarded)
        if abandoned or dropped:
            log.info("shutdown does not wait for disposable work: %d queued call(s) dropped, "
                     "%d running call(s) abandoned%s", dropped, len(abandoned),
                     "".join(f"; {label}" for label in abandoned))
        for lane in lanes:
            if not lane.disposable:
                lane.wait_idle(max(0.0, deadline - time.monotonic()))
        return self.busy()

    def close(self) -> None:
        with self._lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.stop()
        self.runners.close()


class Runners:
    """A pool of daemon threads that run submitted functions; a thread is added whenever none is
    idle, so a function that hangs keeps its thread and never delays the next one."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._closed = False
        #: functions handed to the pool so far (each one hand-off to another thread)
        self.submitted = 0

    def submit(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` on an idle thread (a new one if none is); False once closed. ``fn`` must not
        raise (what it raises is logged)."""
        with self._lock:
            if self._closed:
                return False
            self.submitted += 1
            if self._idle:
                self._idle -= 1
            else:
                self._threads += 1
                threading.Thread(target=self._loop, name=f"{self._prefix}-{self._threads}",
                                 daemon=True).start()
            self._jobs.put(fn)
        return True

    def _loop(self) -> None:
        while True:
            fn = self._jobs.get()
            if fn is None:
                return
            try:
                fn()
            except BaseException:  # pragma: no cover - the hook engine's runner catches all
                log.exception("%s: a runner job raised", self._prefix)
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Let the idle threads end (a busy one ends after its job)."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(None)


def run_bounded(fn: Callable[[], Any], timeout: float, name: str) -> CallResult:
    """Run ``fn`` on a fresh daemon thread and wait at most ``timeout`` seconds (for slow, rare calls
    such as tool handlers, where a thread per call costs nothing next to the call)."""
    box: list[CallResult] = []
    done = threading.Event()

    def target() -> None:
        box.append(run_here(fn))
        done.set()

    threading.Thread(target=target, name=name, daemon=True).start()
    if done.wait(timeout):
        return box[0]
    return CallResult("timed_out", seconds=timeout)


def run_here(fn: Callable[[], Any]) -> CallResult:
    """Run ``fn`` on this thread: its value or its exception as a :class:`CallResult` (the caller
    bounds the wait, e.g. an async layer that abandons the thread at its deadline)."""
    start = time.perf_counter()
    try:
        return CallResult("ok", fn(), seconds=time.perf_counter() - start)
    except Exception as exc:
        return CallResult("error", error=exc, seconds=time.perf_counter() - start)
