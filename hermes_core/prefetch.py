"""Prefetch under a deadline: every provider's ``prefetch`` at once, none allowed to hold the turn.

Hermes joined each provider's prefetch thread for up to 8 s on the turn's critical path and left
the thread running when it timed out. Here each provider's ``prefetch`` runs on its own lane of
the kernel's one executor (a :class:`~._lanes.Lane` of this runner's: a daemon thread created on
first use that runs that provider's calls one at a time). A turn hands its idle providers to one
runner thread of the executor, which calls them one after the other (one hand-off, not one per
provider); when one of them takes longer than :data:`SOLO_SECONDS`, the ones not started yet go
to their own lanes and answer side by side. The turn waits until all have answered or the
deadline (``memory.prefetch_timeout``, 0.3 s by default) passes, whichever comes first. Then:

* a provider that answered in time contributes its answer (``fresh``);
* a provider that is late, or still busy with an earlier call, contributes the last answer it
  gave, if any and it allows reuse (``stale``); its lane is not given a second call while one is
  outstanding, so a hung provider costs one stuck daemon thread, never a pile of them, and never
  more than the deadline;
* a provider that raised contributes nothing (``error``); the error is logged with its name.

Lateness is reported as every hook's is (:meth:`~hermes_core.hooks.Hooks.report_late`): one
warning naming the plugin, the deadline and the setting to raise (``memory.prefetch_timeout``),
and a problem on ``host.hooks.problems`` (``timed_out``, or ``queued`` while still busy).

A late answer is not lost: it becomes that provider's "last answer" for the next turn, unless the
provider says its answers belong to their one message (``reuse_prefetch = False``): then it has no
last answer, and a turn it is late for gets nothing from it.

An erasure of the stores (``forget``, ``memory rollback``, ``sessions delete``, from any process)
drops every last answer, as :meth:`PrefetchRunner.forget` does: each was made from the stores as
they were. An answer to a call made before either lands afterwards is not kept as a last answer.
"""

from __future__ import annotations

import contextvars
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ._lanes import Lane
from .fence import provider_label, provider_text

if TYPE_CHECKING:
    from .hooks import HookOutcome
    from .host import PluginHost
    from .types import Session

__all__ = ["PrefetchResult", "PrefetchRunner", "Status"]

Status = Literal["fresh", "stale", "error"]


@dataclass(slots=True)
class PrefetchResult:
    """What one provider contributed to one turn."""

    provider: str  #: the provider's name (``file_memory``)
    plugin: str  #: its plugin-manager name (``memory-provider:file_memory``)
    status: Status
    text: str = ""  #: sanitised, bounded text; ``""`` when it had nothing
    seconds: float | None = None  #: how long the call took, when it finished in time
    error: str | None = None


#: how long one provider may run on the shared runner before the providers after it are handed
#: to their own lanes (in-process providers answer in microseconds; one doing I/O does not)
SOLO_SECONDS = 0.02


class _Batch:
    """The answers of one turn's prefetch, filled in by the lanes."""

    __slots__ = ("current", "done", "epoch", "lock", "pending", "results", "since", "taken")

    def __init__(self, pending: int, epoch: int = 0) -> None:
        self.epoch = epoch  #: the runner's epoch when the turn started (see PrefetchRunner.forget)
        self.lock = threading.Lock()
        self.pending = pending
        self.done = threading.Event()
        self.results: dict[str, tuple[str, float, str | None]] = {}
        self.current: _Lane | None = None  #: the provider the runner calls now
        self.since = 0.0  #: when that call started
        self.taken = False  #: the caller sent the providers not started yet to their lanes

    def deliver(self, plugin: str, text: str, seconds: float, error: str | None) -> None:
        with self.lock:
            self.results[plugin] = (text, seconds, error)
            self.pending -= 1
            if self.pending == 0:
                self.done.set()


class _Lane:
    """One provider's prefetch lane (on the kernel's executor) and its last answer."""

    def __init__(self, runner: PrefetchRunner, plugin: str, lane: Lane) -> None:
        self.plugin = plugin
        self.last = ""
        self.busy = False
        self._runner = runner
        self._lane = lane

    def call(self, query: str, session: Session, batch: _Batch) -> None:
        """Run this provider's prefetch here and deliver its answer."""
        start = time.perf_counter()
        outcomes = self._runner.host.hooks.prefetch(query=query, session=session,
                                                    only=self.plugin)
        self._answer(outcomes, time.perf_counter() - start, batch)

    def submit(self, query: str, session: Session, batch: _Batch) -> None:
        self.busy = True
        context = contextvars.copy_context()  # the call runs in the turn's context
        if not self._lane.submit(lambda: context.run(self.call, query, session, batch),
                                 "prefetch"):
            self.busy = False
            batch.deliver(self.plugin, "", 0.0, "the prefetch lane is closed")

    def stop(self) -> None:
        self._lane.stop()

    def _answer(self, outcomes: list[HookOutcome], seconds: float, batch: _Batch) -> None:
        text, error = "", None
        for outcome in outcomes:  # this lane's provider (more than one if it has wrappers)
            if outcome.error is not None:
                error = f"{type(outcome.error).__name__}: {outcome.error}"
            elif outcome.value is not None:
                text = provider_text(outcome.value, plugin=self.plugin, hook="prefetch")
        provider = self._runner.host.pm.get_plugin(self.plugin)
        with self._runner.lock:
            # an answer to a call made before an erasure (or a new conversation) is not kept
            if (error is None and getattr(provider, "reuse_prefetch", True)
                    and batch.epoch == self._runner.epoch):
                self.last = text
            self.busy = False
        batch.deliver(self.plugin, text, seconds, error)


class PrefetchRunner:
    """Runs ``prefetch`` on every implementing provider under one deadline per turn."""

    def __init__(self, host: PluginHost, *, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"prefetch timeout must be positive, got {timeout}")
        self.host = host
        self.timeout = timeout
        self.lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        #: moves on at every :meth:`forget`: answers to calls made before are not kept
        self.epoch = 0
        #: the erasure generation the last answers were made under (None: not read yet)
        self._generation: int | None = None

    def run(self, query: str, session: Session) -> list[PrefetchResult]:
        """One turn's prefetch; returns one result per implementing provider, in activation order.

        Returns after at most ``timeout`` seconds (plus scheduling jitter), whatever the providers do.
        An erasure committed since the last turn (``forget`` beside a running server) reaches the
        providers first (``on_erasure``), so no recall prepared before it is served after it.
        """
        generation = self.host.heed_erasures()
        if generation is not None:
            if self._generation is not None and generation != self._generation:
                self.forget()  # the last answers were made from what was erased
            self._generation = generation
        plugins = self.host.hooks.implemented(self.host.pm.hook.prefetch)
        if not plugins:
            return []
        idle: list[_Lane] = []
        with self.lock:
            for plugin in plugins:
                lane = self._lanes.get(plugin)
                if lane is None:
                    lane = self._lanes[plugin] = _Lane(
                        self, plugin, Lane(f"hermes-prefetch-{provider_label(plugin)}"))
                if not lane.busy:
                    idle.append(lane)
        batch = _Batch(len(idle), self.epoch)
        deadline = time.perf_counter() + self.timeout
        if len(idle) > 1:
            self._run_together(idle, query, session, batch, deadline)
        else:
            for lane in idle:
                lane.submit(query, session, batch)
        if idle:
            batch.done.wait(max(0.0, deadline - time.perf_counter()))
        out: list[PrefetchResult] = []
        submitted = {lane.plugin for lane in idle}
        late: list[tuple[str, bool]] = []
        with batch.lock, self.lock:
            for plugin in plugins:
                label = provider_label(plugin)
                answer = batch.results.get(plugin)
                if answer is None:  # late, or busy with an earlier turn's call
                    out.append(PrefetchResult(label, plugin, "stale", self._lanes[plugin].last))
                    late.append((plugin, plugin not in submitted))
                    continue
                text, seconds, error = answer
                status: Status = "error" if error is not None else "fresh"
                out.append(PrefetchResult(label, plugin, status, text, seconds, error))
        for plugin, queued in late:  # logged and kept as a problem, as every late hook is
            self.host.hooks.report_late(self.host.pm.hook.prefetch, plugin, queued=queued,
                                        deadline=self.timeout, setting="memory.prefetch_timeout",
                                        query=query, session=session)
        return out

    def _run_together(self, idle: list[_Lane], query: str, session: Session, batch: _Batch,
                      deadline: float) -> None:
        """The idle providers one after the other on one runner of the kernel's executor (one
        hand-off instead of one per provider). When one of them runs longer than
        :data:`SOLO_SECONDS`, the caller hands the ones not started yet to their own lanes, so
        they still answer side by side under the shared deadline; the slow one goes on where it
        is, its provider busy until it answers."""
        with self.lock:
            for lane in idle:
                lane.busy = True
        context = contextvars.copy_context()  # the calls run in the turn's context

        def job() -> None:
            for lane in idle:
                with batch.lock:
                    if batch.taken:
                        return
                    batch.current, batch.since = lane, time.perf_counter()
                context.run(lane.call, query, session, batch)
            with batch.lock:
                batch.current = None

        if not self.host.hooks.engine.lanes.runners.submit(job):  # closed: lane by lane
            batch.taken = True
        while not batch.taken:
            with batch.lock:
                current, since = batch.current, batch.since
            wait = SOLO_SECONDS if current is None else since + SOLO_SECONDS - time.perf_counter()
            wait = min(wait, deadline - time.perf_counter())
            if batch.done.wait(max(0.0, wait)) or time.perf_counter() >= deadline:
                return
            with batch.lock:
                if batch.current is current and batch.since == since and current is not None:
                    batch.taken = True
        with batch.lock:  # the runner starts no other provider now: the rest go to their lanes
            started = batch.current
            rest = idle[idle.index(started) + 1:] if started is not None else [
                lane for lane in idle if lane.plugin not in batch.results]
        for lane in rest:
            lane.submit(query, session, batch)

    def forget(self) -> None:
        """Drop every provider's last answer (a new conversation must not see the old recall,
        nor anyone what an erasure removed); an answer to a call made before lands unkept."""
        with self.lock:
            self.epoch += 1
            for lane in self._lanes.values():
                lane.last = ""

    def close(self) -> None:
        """Stop the lanes; a lane stuck in a provider stays stuck but is a daemon thread."""
        with self.lock:
            lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            lane.stop()
