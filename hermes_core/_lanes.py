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

A call nobody waits for (``host.hooks.later``) is :meth:`Lane.submit`-ted and counted on a
:class:`Backlog`: one conversation's queued calls across its plugins' lanes, which can be flushed
and is drained with a bound when the conversation closes (and at interpreter exit):

* queued ``prefetch`` calls are dropped first: they only prepare a next turn that will not come,
  and they must not eat the writes' time;
* writes and session boundaries then get the whole bound;
* what still has not run when the bound passes is logged at ERROR level, call by call, and
  returned in a :class:`DrainReport`.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import queue
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["SHARDS", "Backlog", "CallResult", "DrainReport", "Lane", "LaneSet", "Runners",
           "Status", "TaskKind", "drain_all", "run_bounded", "shard_of"]

log = logging.getLogger("hermes_core.lanes")

Status = Literal["ok", "error", "timed_out", "queued"]
TaskKind = Literal["write", "prefetch", "boundary"]
DrainStatus = Literal["idle", "drained", "timed_out"]

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


def shard_of(key: str | None, shards: int = SHARDS) -> int:
    """The lane shard of a conversation key (stable across processes; 0 for no key)."""
    if not key or shards <= 1:
        return 0
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % shards


class _Job:
    __slots__ = ("abandoned", "fn", "label", "reply")

    def __init__(self, fn: Callable[[], Any], label: str, wait: bool) -> None:
        self.fn = fn
        self.label = label
        self.reply: queue.SimpleQueue[CallResult] | None = queue.SimpleQueue() if wait else None
        self.abandoned = not wait  # nobody reads the result


class _Trust:
    """Whether a plugin's lanes for one purpose are late (shared by its shards)."""

    __slots__ = ("late",)

    def __init__(self) -> None:
        self.late = False


class Lane:
    """A FIFO of calls served by one daemon thread, started on first use."""

    def __init__(self, name: str, trust: _Trust | None = None) -> None:
        self.name = name
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

    def release(self) -> None:
        """End a claim: the held calls go to the lane's thread, in the order they came."""
        with self._lock:
            if self._claim is None:
                return
            self._claim = None
            self._backlog -= 1
            held, self._held = self._held, []
            for job in held:
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
            if self._claim is not None:
                self._held.append(job)
            else:
                if self._thread is None:
                    self._start()
                self._jobs.put(job)
        return True

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
        key = (plugin, purpose, shard)
        lane = self._lanes.get(key)
        if lane is None:
            with self._lock:
                lane = self._lanes.get(key)
                if lane is None:
                    name = f"{self._prefix}-{purpose}-{plugin}" + (f"-{shard}" if shard else "")
                    trust = self._trust.setdefault((plugin, purpose), _Trust())
                    lane = self._lanes[key] = Lane(name, trust)
        return lane

    def busy(self) -> list[str]:
        """Labels of lanes with calls queued or running."""
        return [f"{lane.name} ({lane.running() or 'queued'}, {lane.backlog} call(s))"
                for lane in list(self._lanes.values()) if lane.backlog]

    def drain(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds in all for every lane to finish; return what did not."""
        deadline = time.monotonic() + timeout
        for lane in list(self._lanes.values()):
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

    def submit(self, fn: Callable[[], None]) -> bool:
        """Run ``fn`` on an idle thread (a new one if none is); False once closed. ``fn`` must not
        raise (what it raises is logged)."""
        with self._lock:
            if self._closed:
                return False
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
        start = time.perf_counter()
        try:
            box.append(CallResult("ok", fn(), seconds=time.perf_counter() - start))
        except Exception as exc:
            box.append(CallResult("error", error=exc, seconds=time.perf_counter() - start))
        done.set()

    threading.Thread(target=target, name=name, daemon=True).start()
    if done.wait(timeout):
        return box[0]
    return CallResult("timed_out", seconds=timeout)


class _Ticket:
    """One queued hook call: its parts on one or more plugins' lanes."""

    __slots__ = ("dropped", "kind", "label", "left", "seq")

    def __init__(self, label: str, kind: TaskKind, seq: int) -> None:
        self.label = label
        self.kind = kind
        self.seq = seq
        self.left = 1  # its parts still awaited, plus one until the caller has queued them all
        self.dropped = False  # a drain gave up on it: parts not started yet never run


class _Part:
    """One plugin's part of a queued call."""

    __slots__ = ("counted", "deadline", "lane", "on_late", "start", "ticket")

    def __init__(self, ticket: _Ticket, lane: Lane, deadline: float | None,
                 on_late: Callable[[Status], None] | None) -> None:
        self.ticket = ticket
        self.lane = lane
        self.deadline = deadline
        self.on_late = on_late
        self.start: float | None = None
        #: no longer awaited: it finished, passed its deadline, or sits behind a late call
        self.counted = False


@dataclass(slots=True)
class DrainReport:
    """How a drain went."""

    status: DrainStatus
    seconds: float = 0.0
    #: labels of queued prefetch calls dropped because the conversation is over
    skipped_prefetch: list[str] = field(default_factory=list)
    #: labels of writes/boundaries that did not run (or did not finish) within the bound
    abandoned: list[str] = field(default_factory=list)


_live: weakref.WeakSet[Backlog] = weakref.WeakSet()
_live_lock = threading.Lock()


class Backlog:
    """One conversation's calls queued on its plugins' lanes (``host.hooks.later``).

    ``key`` picks the lane shard of every call queued here, so the calls of one conversation
    reach each plugin in the order they were made, across the sessions of a chain; ``None``
    takes the shard from each call's own session.

    A part that runs past its hook's deadline is reported late (``timed_out``) and no longer
    awaited; it keeps running, and the parts queued behind it on its lane are reported
    ``queued`` and not awaited either, so a hung plugin never holds :meth:`flush` or
    :meth:`drain` longer than one deadline. Lateness is noticed by whoever next queues, flushes
    or drains.
    """

    def __init__(self, key: str | None = None, *, drain_timeout: float = 10.0) -> None:
        self.key = key
        self.drain_timeout = drain_timeout
        self._cond = threading.Condition()
        self._open: dict[int, _Ticket] = {}  # by sequence number, oldest first
        self._running: list[_Part] = []
        self._waiting: list[_Part] = []  # queued on a lane, not started, still awaited
        self._seq = 0
        self.completed = 0  #: queued calls that finished (every plugin's part of them)
        self.closed = False
        with _live_lock:
            _live.add(self)

    def open(self, label: str, kind: TaskKind) -> _Ticket | None:
        """Start one queued call; None (and a warning) once the backlog is drained."""
        with self._cond:
            if self.closed:
                log.warning("%r arrived after its conversation was closed and was not run", label)
                return None
            self._seq += 1
            ticket = self._open[self._seq] = _Ticket(label, kind, self._seq)
            return ticket

    def put(self, ticket: _Ticket, lane: Lane, fn: Callable[[], None], *,
            deadline: float | None = None, on_late: Callable[[Status], None] | None = None) -> None:
        """Queue one plugin's part of ``ticket`` on ``lane``, run in the caller's context;
        ``on_late`` hears ``timed_out`` or ``queued`` (see the class doc)."""
        self._sweep()
        part = _Part(ticket, lane, deadline, on_late)
        context = contextvars.copy_context()

        def job() -> None:
            with self._cond:
                if part in self._waiting:
                    self._waiting.remove(part)
                if ticket.dropped:
                    return
                part.start = time.monotonic()
                self._running.append(part)
            try:
                context.run(fn)
            finally:
                with self._cond:
                    self._running.remove(part)
                    in_time = not part.counted
                if in_time and part.deadline is not None:
                    lane.trust()  # it answered in time: a lane late before is trusted again
                self._count(part)

        behind_late = lane.behind_late()
        with self._cond:
            ticket.left += 1
            if not behind_late:
                self._waiting.append(part)
        if not lane.submit(job, ticket.label):
            log.warning("%s: %r arrived after the lane closed and was not run", lane.name,
                        ticket.label)
            with self._cond:
                if part in self._waiting:
                    self._waiting.remove(part)
            self._count(part)
        elif behind_late:
            self._count(part)
            if on_late is not None:
                on_late("queued")

    def seal(self, ticket: _Ticket) -> None:
        """Every part of ``ticket`` is queued: it is done once they are."""
        with self._cond:
            self._settle(ticket)

    def _count(self, part: _Part) -> None:
        with self._cond:
            if not part.counted:
                part.counted = True
                self._settle(part.ticket)

    def _settle(self, ticket: _Ticket) -> None:
        ticket.left -= 1
        if ticket.left == 0 and self._open.pop(ticket.seq, None) is not None:
            self.completed += 1
            self._cond.notify_all()

    def _sweep(self) -> float | None:
        """Report the running parts past their deadline; return the seconds to the next one."""
        now = time.monotonic()
        late: list[_Part] = []
        due: list[float] = []
        with self._cond:
            for part in self._running:
                if part.counted or part.deadline is None or part.start is None:
                    continue
                left = part.start + part.deadline - now
                if left <= 0:
                    late.append(part)
                else:
                    due.append(left)
            lanes = {id(part.lane) for part in late}
            behind = [p for p in self._waiting if id(p.lane) in lanes]
            self._waiting = [p for p in self._waiting if id(p.lane) not in lanes]
        for part in late:
            part.lane.mark_late()
            self._count(part)
            if part.on_late is not None:
                part.on_late("timed_out")
        for part in behind:  # now behind a late call: not awaited either
            self._count(part)
            if part.on_late is not None:
                part.on_late("queued")
        return min(due, default=None)

    def _wait(self, done: Callable[[], bool], timeout: float | None) -> bool:
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            due = self._sweep()
            with self._cond:
                if done():
                    return True
                now = time.monotonic()
                if end is not None and now >= end:
                    return False
                steps = [x for x in (due, None if end is None else end - now) if x is not None]
                self._cond.wait(max(min(steps), 0.001) if steps else None)

    def pending(self) -> list[str]:
        """Labels of the calls queued or running, oldest first."""
        with self._cond:
            return [t.label for t in self._open.values()]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every call queued so far has run; False if ``timeout`` passed first."""
        with self._cond:
            target = self._seq
        return self._wait(lambda: not self._open or next(iter(self._open)) > target, timeout)

    def drain(self, timeout: float | None = None) -> DrainReport:
        """Stop accepting calls, let what is queued run within ``timeout`` seconds (default
        :attr:`drain_timeout`), report the rest (see the module doc). Safe to call again."""
        bound = self.drain_timeout if timeout is None else timeout
        start = time.perf_counter()
        with self._cond:
            already, self.closed = self.closed, True
            skipped = [t for t in self._open.values() if t.kind == "prefetch"
                       and not any(p.ticket is t for p in self._running)]
            for ticket in skipped:
                ticket.dropped = True
                del self._open[ticket.seq]
            busy = bool(self._open)
        finished = self._wait(lambda: not self._open, bound)
        with self._cond:
            left = list(self._open.values())
            for ticket in left:  # what has not started never will
                ticket.dropped = True
            self._open.clear()
        seconds = time.perf_counter() - start
        abandoned = [t.label for t in left]
        if abandoned:
            log.error("%d memory call(s) did not finish within the %.1f s shutdown bound "
                      "(memory.worker_drain_timeout) and may not be stored: %s",
                      len(abandoned), bound, "; ".join(abandoned))
        if skipped and not already:
            log.debug("dropped %d queued prefetch call(s) at shutdown", len(skipped))
        status: DrainStatus = "timed_out" if not finished else ("drained" if busy else "idle")
        return DrainReport(status, seconds, [t.label for t in skipped], abandoned)


def drain_all(timeout: float | None = None) -> list[DrainReport]:
    """Drain every open backlog, sharing one deadline (by default the longest bound of those
    with calls pending)."""
    with _live_lock:
        backlogs = [b for b in _live if not b.closed]
    if not backlogs:
        return []
    bound = timeout if timeout is not None else max(
        (b.drain_timeout for b in backlogs if b.pending()), default=0.0)
    deadline = time.perf_counter() + bound
    return [b.drain(max(0.0, deadline - time.perf_counter())) for b in backlogs]


@atexit.register
def _drain_at_exit() -> None:
    # Lane threads are daemons, killed when the interpreter ends: queued writes would vanish.
    drain_all()
