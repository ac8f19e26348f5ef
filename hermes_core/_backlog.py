"""A conversation's backlog: the calls it queued on its plugins' lanes (``host.hooks.later``).

A call nobody waits for is :meth:`~._lanes.Lane.submit`-ted on each plugin's lane and counted
here, so it can be flushed, and drained with a bound when the conversation closes (and at
interpreter exit):

* queued ``prefetch`` calls are dropped first: they only prepare a next turn that will not come,
  and they must not eat the writes' time;
* writes and session boundaries then get the whole bound;
* what still has not run when the bound passes is logged at ERROR level, call by call, and
  returned in a :class:`DrainReport`.
"""

from __future__ import annotations

import atexit
import contextvars
import functools
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._lanes import Lane, Runners, Status

__all__ = ["Backlog", "DrainReport", "TaskKind", "drain_all"]

log = logging.getLogger("hermes_core.lanes")

TaskKind = Literal["write", "prefetch", "boundary"]
DrainStatus = Literal["idle", "drained", "timed_out"]


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

    __slots__ = ("context", "counted", "deadline", "fn", "group", "lane", "on_late", "start",
                 "ticket")

    def __init__(self, ticket: _Ticket, lane: Lane, fn: Callable[[], None],
                 context: contextvars.Context, deadline: float | None,
                 on_late: Callable[[Status], None] | None) -> None:
        self.ticket = ticket
        self.lane = lane
        self.fn = fn
        self.context = context
        self.deadline = deadline
        self.on_late = on_late
        self.start: float | None = None
        #: no longer awaited: it finished, passed its deadline, or sits behind a late call
        self.counted = False
        #: the parts run one after the other on one runner thread, when this is one of them
        self.group: _Group | None = None


class _Group:
    """Parts run one after the other on one runner thread, over lanes claimed for them.

    A later call whose lanes the group still holds joins it (its parts go after the ones
    there), so a turn's queued calls cost one hand-off in all. ``pending`` counts, per lane, the
    parts not run yet: the lane's claim is released after the last of them.
    """

    __slots__ = ("abandoned", "current", "finished", "lock", "parts", "pending", "running")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parts: list[_Part] = []
        self.pending: dict[Lane, int] = {}
        self.current = -1  # the index of the part running (or run last)
        self.running = False  # parts[current] runs now
        self.finished = False  # the runner ran out of parts: nothing joins any more
        self.abandoned = False  # a part was late: the rest went to their own lanes

    def join(self, parts: list[_Part], label: str, *, claim: bool) -> list[_Part]:
        """Take the parts whose lanes this group holds with nothing held behind (or, with
        ``claim``, can claim now); return the others. A group already handed to a runner takes
        no lane it does not hold: a plugin idle until now does not wait behind its parts."""
        rest: list[_Part] = []
        with self.lock:
            if self.finished or self.abandoned:
                return parts
            for part in parts:
                lane = part.lane
                if ((lane in self.pending and lane.claim_is_clear())
                        or (claim and lane.try_claim(label))):
                    part.group = self
                    self.parts.append(part)
                    self.pending[lane] = self.pending.get(lane, 0) + 1
                else:
                    rest.append(part)
        return rest

    def next(self, index: int) -> _Part | None:
        """The part to run at ``index``; None when there is none (or the group was abandoned)."""
        with self.lock:
            if self.abandoned or index >= len(self.parts):
                self.finished = True
                return None
            self.current, self.running = index, True
            return self.parts[index]

    def ran(self, index: int) -> tuple[bool, list[_Part]]:
        """The part at ``index`` is over: whether to release its lane, and the parts still to run
        on that lane first (when the group was abandoned meanwhile)."""
        lane = self.parts[index].lane
        with self.lock:
            self.running = False
            if self.abandoned:  # abandon() left this lane's parts to the runner
                return True, [p for p in self.parts[index + 1:] if p.lane is lane]
            left = self.pending[lane] - 1
            if left:
                self.pending[lane] = left
                return False, []
            del self.pending[lane]
            return True, []

    def abandon(self) -> dict[Lane, list[_Part]]:
        """Stop the runner; the parts not started, by lane (except the running part's lane,
        which the runner hands over when that part is over)."""
        with self.lock:
            if self.abandoned:
                return {}
            self.abandoned = True
            busy = self.parts[self.current].lane if self.running else None
            rest: dict[Lane, list[_Part]] = {}
            for part in self.parts[self.current + 1:]:
                if part.lane is not busy:
                    rest.setdefault(part.lane, []).append(part)
            return rest


class _Dispatcher:
    """The one thread that expands a backlog's queued calls into parts, in the order they were
    queued, and runs the group it made (see :meth:`Backlog.defer`)."""

    __slots__ = ("group", "index", "part", "run")

    def __init__(self, run: bool) -> None:
        self.group: _Group | None = None  #: the group this thread runs itself
        self.index = 0  #: the index of the group's next part
        self.part: _Part | None = None  #: the part it runs now
        self.run = run  #: False: it only expands (the runners are closed), parts go to lanes


#: the dispatcher running on this thread, and its backlog
_here = threading.local()


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
        self._group: _Group | None = None  # the last group handed to a runner
        #: queued calls not expanded into parts yet, in order, and the thread expanding them
        self._deferred: deque[tuple[contextvars.Context, Callable[[], None]]] = deque()
        self._dispatcher: _Dispatcher | None = None
        self._runners: Runners | None = None
        self._expanding = 0  # calls being expanded now
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
        part = _Part(ticket, lane, fn, contextvars.copy_context(), deadline, on_late)
        self._register([part])
        self._to_lane(part)

    def put_batch(self, ticket: _Ticket, parts: Sequence[tuple[Lane, Callable[[], None],
                                                                float | None,
                                                                Callable[[Status], None] | None]],
                  runners: Runners) -> None:
        """Queue several plugins' parts of ``ticket`` to run one after the other on one runner
        thread (one hand-off instead of one per plugin).

        The parts join the group still pending from an earlier call when it holds their lanes,
        else a new group claims their lanes (:meth:`Lane.try_claim`); a part
        whose lane is busy or late goes to the lane itself. Each plugin so still sees its calls
        one at a time and in order. When a part is late, the parts of its group not started yet
        go to their own lanes (noticed, like every lateness, at the next put, flush or drain)."""
        self._sweep()
        # a context per part: the parts may run at once on different threads (some join the
        # pending group, others a new one or their lanes), and a context runs on one at a time
        made = [_Part(ticket, lane, fn, contextvars.copy_context(), deadline, on_late)
                for lane, fn, deadline, on_late in parts]
        self._register(made)
        with self._cond:
            pending = self._group
        rest = made if pending is None else pending.join(made, ticket.label, claim=False)
        if rest:
            group = _Group()
            rest = group.join(rest, ticket.label, claim=True)
            if group.parts:
                with self._cond:
                    self._group = group
                here: _Dispatcher | None = getattr(_here, "dispatcher", None)
                if (here is not None and getattr(_here, "backlog", None) is self and here.run
                        and (here.group is None or here.group.finished)):
                    here.group, here.index = group, 0  # the dispatcher runs it next
                elif not runners.submit(functools.partial(self._run_group, group)):
                    self._reroute(group.abandon())
        for part in rest:
            self._to_lane(part)

    def defer(self, expand: Callable[[], None], runners: Runners) -> None:
        """Hand a queued call to this backlog's dispatcher: ``expand`` (run in the caller's
        context) turns it into its parts (:meth:`put`, :meth:`put_batch`) and seals its ticket.

        The caller's thread pays one append, and one hand-off when no dispatcher is active. The
        dispatcher expands the calls one at a time in the order they came, so each plugin still
        gets its parts in order, and runs the group its expansion claimed itself (the calls
        expanded between two of its parts join that group, as :meth:`put_batch` describes). A
        dispatcher stuck in a part past its deadline is replaced by a new one for the calls
        queued since; the late one only finishes its part."""
        context = contextvars.copy_context()
        self._runners = runners
        self._sweep()
        with self._cond:
            self._deferred.append((context, expand))
            current = self._dispatcher
            if current is not None and not (current.part is not None and current.part.counted):
                return  # it expands this call after what it does now
        self._kick(runners)

    def _kick(self, runners: Runners) -> None:
        """Start a dispatcher for the deferred calls when none is active (or the active one is
        stuck in a late part)."""
        with self._cond:
            current = self._dispatcher
            if not self._deferred or (current is not None and not (
                    current.part is not None and current.part.counted)):
                return
            dispatcher = self._dispatcher = _Dispatcher(run=True)
        if not runners.submit(functools.partial(self._dispatch, dispatcher)):
            # the runners are closed: expand here, each part to its own lane
            dispatcher.run = False
            self._dispatch(dispatcher)

    def _dispatch(self, me: _Dispatcher) -> None:
        """A dispatcher's job: expand the deferred calls, run the group they claimed."""
        _here.dispatcher, _here.backlog = me, self
        try:
            while True:
                self._expand(me)
                group = me.group
                part = group.next(me.index) if group is not None else None
                if group is None or part is None:
                    with self._cond:
                        if self._dispatcher is not me:
                            return
                        if not self._deferred:
                            self._dispatcher = None
                            return
                    me.group = None
                    continue
                me.part = part
                try:
                    self._run(part)
                finally:
                    me.part = None
                    self._expand(me)  # before its lane is released: later calls join the group
                    release, first = group.ran(me.index)
                    if release:
                        self._reroute({part.lane: first})
                me.index += 1
        finally:
            _here.dispatcher = _here.backlog = None

    def _expand(self, me: _Dispatcher) -> None:
        """Expand the deferred calls, oldest first, while ``me`` is the dispatcher."""
        while True:
            with self._cond:
                if self._dispatcher is not me or not self._deferred:
                    return
                context, expand = self._deferred.popleft()
                self._expanding += 1
            try:
                context.run(expand)
            finally:
                with self._cond:
                    self._expanding -= 1
                    if not self._deferred and not self._expanding:
                        self._cond.notify_all()

    def _expanded(self, timeout: float) -> bool:
        """Wait until no queued call waits to be expanded; False if ``timeout`` passed first."""
        return self._wait(lambda: not self._deferred and not self._expanding, timeout)

    def _register(self, parts: list[_Part]) -> None:
        """Count parts on their ticket and await them (until they run, are late or are behind a
        late call)."""
        with self._cond:
            for part in parts:
                part.ticket.left += 1
                self._waiting.append(part)

    def _to_lane(self, part: _Part) -> None:
        """Queue a registered part on its own lane."""
        lane = part.lane
        behind_late = lane.behind_late()
        queued = lane.submit(functools.partial(self._run, part), part.ticket.label)
        if not queued:
            log.warning("%s: %r arrived after the lane closed and was not run", lane.name,
                        part.ticket.label)
        if not queued or behind_late:
            with self._cond:
                if part in self._waiting:
                    self._waiting.remove(part)
            self._count(part)
            if queued and part.on_late is not None:
                part.on_late("queued")

    def _run_group(self, group: _Group) -> None:
        """A runner's job: the group's parts in order, each lane released after its last part."""
        index = 0
        while (part := group.next(index)) is not None:
            try:
                self._run(part)
            finally:
                release, first = group.ran(index)
                if release:
                    self._reroute({part.lane: first})
            index += 1

    def _reroute(self, by_lane: dict[Lane, list[_Part]]) -> None:
        """End the claims on these lanes, their parts not started first, in order (ahead of
        what the claims held)."""
        for lane, parts in by_lane.items():
            lane.release(first=[functools.partial(self._run, part) for part in parts])

    def _run(self, part: _Part) -> None:
        """Run one part where it is (its lane's thread, or a runner holding its lane's claim)."""
        with self._cond:
            if part in self._waiting:
                self._waiting.remove(part)
            if part.ticket.dropped:
                return
            part.start = time.monotonic()
            self._running.append(part)
            self._cond.notify_all()  # a waiter re-reads when the next deadline is due
        try:
            part.context.run(part.fn)
        finally:
            with self._cond:
                self._running.remove(part)
                in_time = not part.counted
            if in_time and part.deadline is not None:
                part.lane.trust()  # it answered in time: a lane late before is trusted again
            self._count(part)

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
            behind: list[_Part] = []
            if late:  # the common case has none: no pass over what waits
                lanes = {id(part.lane) for part in late}
                behind = [p for p in self._waiting if id(p.lane) in lanes]
                self._waiting = [p for p in self._waiting if id(p.lane) not in lanes]
        for part in late:
            part.lane.mark_late()
            self._count(part)
            if part.on_late is not None:
                part.on_late("timed_out")
            if part.group is not None:
                self._reroute(part.group.abandon())
        for part in behind:  # now behind a late call: not awaited either
            self._count(part)
            if part.on_late is not None:
                part.on_late("queued")
        if late and self._runners is not None:
            self._kick(self._runners)  # the dispatcher may be the one stuck in a late part
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


def expand_all(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds until every open backlog's queued calls are expanded into
    parts on their lanes (before the lanes are drained and closed); False if some are not."""
    deadline = time.monotonic() + timeout
    with _live_lock:
        backlogs = list(_live)
    return all(b._expanded(max(0.0, deadline - time.monotonic())) for b in backlogs)


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
