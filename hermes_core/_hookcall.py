"""How one hook call runs: pluggy's own ``_multicall`` over guarded copies of the implementations.

pluggy decides the call order (``tryfirst``/``trylast``, last registered first), stops a
``firstresult`` hook at the first non-``None`` value and runs ``wrapper=True`` and
``hookwrapper=True`` implementations around the rest. The kernel keeps all of that by handing
pluggy's executor (through ``PluginManager._hookexec``, so ``add_hookcall_monitoring`` sees every
call) a list of implementations it has *guarded*: the same plugin, name and options, and a function
that adds what pluggy does not do:

* **kind scoping**: only the implementations of the receiving kinds are in the list (a plugin module
  implementing ``compress`` does not take part in the engine's hook);
* **isolation**: an implementation that raises, or returns the wrong type, is recorded with plugin
  and hook and contributes ``None``; the others still run;
* **a deadline**: a bounded implementation runs on its plugin's lane (:mod:`._lanes`); when it is
  late the call goes on without it, recorded as ``timed_out`` (``queued`` while an earlier late call
  still runs), and its side effects land later, in order;
* **inline**: the few quick implementations that built-in plugin modules mark
  with ``loader.inline`` run on the calling thread, with no lane and no deadline; every other
  implementation of the same hook still runs on its lane (or its runner, see below);
* **one hand-off per call**: when two or more bounded implementations and no wrapper take part,
  the caller hands the whole of pluggy's call to one runner thread instead of one lane hand-off per
  implementation (a hand-off costs tens of microseconds on a busy machine). The runner claims each
  plugin's lane in turn and runs the implementation inline (a lane that is busy or late gets the
  call through its own FIFO instead), so a plugin still sees one call at a time per lane (a
  plugin has a few lanes per purpose; one conversation's calls always use the same one). The
  caller watches each implementation's own deadline: when one is late, the caller *takes over*:
  that implementation is recorded as ``timed_out`` and keeps running where it is, the runner skips
  the rest, and the caller runs the ones not started yet through their lanes, in the same order
  (pluggy's monitoring then sees that remainder as a second call);
* **wrappers that misbehave** (raise, never yield, yield twice) are recorded and then behave as a
  transparent wrapper instead of breaking the call;
* **tracing**: with ``HERMES_CORE_TRACE_PLUGINS=1`` every implementation call is printed to stderr
  (hook, plugin, milliseconds, outcome).

A wrapper's two parts (before and after its ``yield``) each run on its plugin's lane under the
hook's deadline; a part that is late makes the wrapper transparent for that call.

**Queued calls** (``host.hooks.later``, ``later=`` here) do not wait: the caller's thread only
opens the call's ticket and appends one closure with the hook's arguments to the conversation's
:class:`~._backlog.Backlog` (:meth:`~._backlog.Backlog.defer`). The backlog's one dispatcher
(a runner thread) expands the calls in the order they came: pluggy's executor runs there, in
pluggy's order, and each implementation becomes a part queued on its plugin's lane for the
conversation; its outcome is reported when it has run, as a waited call's would be. The
implementations whose lanes are idle are claimed and run by the dispatcher itself, one after the
other; a call expanded while it still holds their lanes joins it (a turn's ``sync_turn`` and
``queue_prefetch`` cost the turn one hand-off together, see
:meth:`~._backlog.Backlog.put_batch`); a late one sends the rest to their lanes.
A call with wrappers is queued whole, on the outermost wrapper's lane, and runs there as a
waited call, so the wrappers still see the inner results.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pluggy

from ._backlog import Backlog, TaskKind, _Ticket
from ._lanes import CallResult, Lane, LaneSet, run_here, shard_of
from ._problems import HookOutcome, HookProblem, OutcomeStatus, ProblemLog

__all__ = ["HookCallEngine", "HookOutcome", "HookProblem", "OutcomeStatus"]

Check = Callable[[Any], str | None]


@dataclass(slots=True, frozen=True)
class Later:
    """How to queue a call instead of waiting for it: on which backlog, with what label."""

    backlog: Backlog
    label: str
    kind: TaskKind


class _Queued:
    """A queued call being handed to the lanes on the caller's thread."""

    __slots__ = ("kwargs", "later", "parts", "shard", "ticket", "timeout")

    def __init__(self, later: Later, ticket: _Ticket, kwargs: Mapping[str, Any],
                 claim: bool, shard: int, timeout: float) -> None:
        self.later = later
        self.ticket = ticket
        self.kwargs = kwargs
        self.shard = shard  #: the lane shard of the conversation (one per call)
        self.timeout = timeout  #: the hook's deadline
        #: the parts to hand to the backlog together (one runner); None: each on its lane
        self.parts: list[tuple[Lane, Callable[[], None], float | None,
                                 Callable[[Any], None] | None]] | None = [] if claim else None


class _Batch:
    """One hook call run on a runner thread (see the module doc)."""

    __slots__ = ("abandoned", "current", "done", "error", "lanes", "lock", "outcomes", "result",
                 "start", "started", "timeout")

    def __init__(self, lanes: dict[str, Lane], timeout: float) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.lanes = lanes  #: plugin -> its lane for this call
        self.timeout = timeout  #: each implementation's deadline
        self.started: set[str] = set()
        self.outcomes: list[HookOutcome] = []  #: in call order, before the caller reports them
        self.current: str | None = None  #: the plugin whose implementation runs now
        self.start = 0.0
        self.abandoned = False  #: the caller took over
        self.result: Any = None
        self.error: BaseException | None = None

    def mark_late(self, plugin: str) -> None:
        lane = self.lanes.get(plugin)  # None: an implementation that runs inline
        if lane is not None:
            lane.mark_late()


@dataclass(slots=True)
class _Prepared:
    """A hook's guarded implementations for one set of call options, and their lanes."""

    impls: list[pluggy.HookImpl]
    #: the plugins of a call that may go to one runner (no wrappers, bounded); else None
    batch: tuple[str, ...] | None
    #: the lanes' purpose (``turn``, ``background``); None for an unbounded hook
    purpose: str | None


def conversation_of(kwargs: Mapping[str, Any]) -> str | None:
    """The conversation a hook call is about, which picks the plugin's lane: the session's
    conversation key (its id when it has none; the ``agent``'s session for the agent's own hooks),
    or the ``conversation_key``/``session_id`` argument; None for a call about no conversation."""
    for name in ("session", "new_session", "agent"):
        session = kwargs.get(name)
        if name == "agent":  # the agent's own hooks: its session of the moment
            session = getattr(session, "session", None)
        if session is not None:
            attributes = getattr(session, "attributes", None)
            key = attributes.get("conversation_key") if isinstance(attributes, dict) else None
            return str(key or getattr(session, "id", "") or "") or None
    key = kwargs.get("conversation_key") or kwargs.get("session_id")
    return key if isinstance(key, str) else None


class HookCallEngine(ProblemLog):
    """Runs hook calls for one plugin manager (see the module doc)."""

    def __init__(
        self,
        pm: pluggy.PluginManager,
        *,
        kind_of: Callable[[str], str],
        timeout_of: Callable[[str], float],
        lanes: LaneSet | None = None,
    ) -> None:
        self.pm = pm
        self._kind_of = kind_of
        self._timeout_of = timeout_of
        self.lanes = lanes or LaneSet()
        #: (plugin name, plugin, hook) -> whether that plain implementation runs on the calling
        #: thread with no lane (the host sets :func:`~hermes_core.loader.runs_inline`)
        self.inline_of: Callable[[str, object, str], bool] = _never
        self._guarded: dict[tuple[Any, ...], _Prepared] = {}
        self._local = threading.local()
        ProblemLog.__init__(self)

    # ------------------------------------------------------------------------------ the call

    def call(
        self,
        caller: pluggy.HookCaller,
        kwargs: Mapping[str, Any],
        *,
        receivers: frozenset[str],
        lane: str | None,
        check: Check | None = None,
        only: str | None = None,
        exclude: str | None = None,
        later: Later | None = None,
    ) -> tuple[Any, list[HookOutcome]]:
        """Call the hook; return pluggy's result (a list, or one value for ``firstresult`` hooks)
        and one :class:`HookOutcome` per implementation that ran, in call order. With ``later``
        the call is queued (see the module doc) and returns ``([], [])`` at once."""
        impls = caller.get_hookimpls()
        key = (caller.name, receivers, lane, only, exclude, *map(id, impls))
        prepared = self._guarded.get(key)
        if prepared is None:
            prepared = self._prepare(caller.name, impls, receivers, lane, check, only, exclude)
            if len(self._guarded) > 4096:  # registrations churned (tests): start over
                self._guarded.clear()
            self._guarded[key] = prepared
        firstresult = _firstresult(caller)
        if not prepared.impls:
            return (None if firstresult else []), []
        if later is not None:
            self._queue(caller, prepared, kwargs, firstresult, later)
            return (None if firstresult else []), []
        stack: list[tuple[list[HookOutcome], Mapping[str, Any]]] | None = getattr(
            self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        record: list[HookOutcome] = []
        stack.append((record, kwargs))
        # a call made by an implementation running on a runner is not part of that runner's call
        outer: _Batch | None = getattr(self._local, "batch", None)
        self._local.batch = None
        try:
            if prepared.batch is not None and outer is None:
                result = self._run_batch(caller.name, prepared, kwargs, firstresult, record)
            else:
                result = self.pm._hookexec(caller.name, prepared.impls, kwargs, firstresult)
        finally:
            stack.pop()
            self._local.batch = outer
        return result, record

    def _queue(self, caller: pluggy.HookCaller, prepared: _Prepared, kwargs: Mapping[str, Any],
               firstresult: bool, later: Later) -> None:
        """Hand a call to the conversation's dispatcher without waiting (see the module doc):
        the caller's thread pays one append; :meth:`_expand` runs on the dispatcher."""
        ticket = later.backlog.open(later.label, later.kind)
        if ticket is not None:
            later.backlog.defer(functools.partial(
                self._expand, caller.name, prepared, kwargs, firstresult, later, ticket),
                self.lanes.runners)

    def _expand(self, hook: str, prepared: _Prepared, kwargs: Mapping[str, Any],
                firstresult: bool, later: Later, ticket: _Ticket) -> None:
        """Turn a queued call into one part per implementation, in pluggy's order, on the
        backlog's dispatcher (pluggy's executor and its monitoring see the call here)."""
        wrappers = [i for i in prepared.impls if i.wrapper or i.hookwrapper]
        shard = shard_of(later.backlog.key or conversation_of(kwargs), self.lanes.shards)
        queued = _Queued(later, ticket, kwargs, prepared.batch is not None, shard,
                         self._timeout_of(hook))
        try:
            if wrappers:  # pluggy runs the last registered wrapper outermost
                lane = self._lane(wrappers[-1].plugin_name, prepared.purpose, kwargs, later)
                if lane is not None:
                    impls = prepared.impls
                    later.backlog.put(ticket, lane, lambda: self._run_queued_whole(
                        hook, impls, kwargs, firstresult))
                    return
            previous = getattr(self._local, "queued", None)
            self._local.queued = queued
            try:
                self.pm._hookexec(hook, prepared.impls, kwargs, firstresult)
            finally:
                self._local.queued = previous
            if queued.parts:
                later.backlog.put_batch(ticket, queued.parts, self.lanes.runners)
        finally:
            later.backlog.seal(ticket)

    def _run_queued_whole(self, hook: str, impls: list[pluggy.HookImpl],
                          kwargs: Mapping[str, Any], firstresult: bool) -> None:
        """A queued call with wrappers, on the outermost wrapper's lane, as a waited call."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append(([], kwargs))
        try:
            self.pm._hookexec(hook, impls, kwargs, firstresult)
        finally:
            stack.pop()

    def _prepare(self, hook: str, impls: Sequence[pluggy.HookImpl], receivers: frozenset[str],
                 lane: str | None, check: Check | None, only: str | None,
                 exclude: str | None) -> _Prepared:
        chosen = [impl for impl in impls
                  if (only is None or impl.plugin_name == only)
                  and impl.plugin_name != exclude
                  and self._kind_of(impl.plugin_name) in receivers]
        lanes = [None if lane is None or (not (i.wrapper or i.hookwrapper)
                                          and self.inline_of(i.plugin_name, i.plugin, hook))
                 else lane for i in chosen]
        guarded = [self._guard(hook, impl, own, check) for impl, own in zip(chosen, lanes, strict=True)]
        bounded = [i.plugin_name for i, own in zip(chosen, lanes, strict=True) if own is not None]
        # one implementation gains nothing from a runner: its lane is already one hand-off
        batchable = (len(bounded) > 1 and not any(i.wrapper or i.hookwrapper for i in chosen))
        batch = tuple(bounded) if batchable else None
        return _Prepared(guarded, batch, lane)

    def _lane(self, plugin: str, purpose: str | None, kwargs: Mapping[str, Any],
              later: Later | None = None) -> Lane | None:
        if purpose is None:
            return None
        key = later.backlog.key if later is not None and later.backlog.key else None
        return self.lanes.get(plugin, purpose,
                              shard_of(key or conversation_of(kwargs), self.lanes.shards))

    # ------------------------------------------------------------------------------ one runner

    def _run_batch(self, hook: str, prepared: _Prepared, kwargs: Mapping[str, Any],
                   firstresult: bool, record: list[HookOutcome]) -> Any:
        assert prepared.batch is not None and prepared.purpose is not None
        shard = shard_of(conversation_of(kwargs), self.lanes.shards)
        batch = _Batch({p: self.lanes.get(p, prepared.purpose, shard) for p in prepared.batch},
                       self._timeout_of(hook))
        impls = prepared.impls
        context = contextvars.copy_context()  # the runner runs the call in the caller's context

        def job() -> None:
            self._local.batch = batch
            try:
                batch.result = context.run(self.pm._hookexec, hook, impls, kwargs, firstresult)
            except BaseException as exc:  # pragma: no cover - guarded implementations do not raise
                batch.error = exc
            finally:
                self._local.batch = None
                batch.done.set()

        if not self.lanes.runners.submit(job):  # closed: the call goes lane by lane
            return self.pm._hookexec(hook, impls, kwargs, firstresult)
        timeout = batch.timeout
        late: str | None = None
        while late is None:
            with batch.lock:
                current, start = batch.current, batch.start
            wait = timeout if current is None else start + timeout - time.perf_counter()
            if batch.done.wait(max(0.0, wait)):
                break
            with batch.lock:
                if (current is not None and batch.current == current and batch.start == start
                        and time.perf_counter() - start >= timeout):
                    batch.abandoned, late = True, current
        if late is None:
            for outcome in batch.outcomes:
                self._settle(hook, outcome, kwargs, record)
            if batch.error is not None:  # pragma: no cover
                raise batch.error
            return batch.result
        # take over: the late implementation keeps running where it is; the runner skips the
        # rest, which run here through their lanes, in the same order
        batch.mark_late(late)
        for outcome in batch.outcomes:
            self._settle(hook, outcome, kwargs, record)
        self._settle(hook, HookOutcome(late, seconds=timeout, status="timed_out"), kwargs, record)
        rest = [impl for impl in impls if impl.plugin_name not in batch.started]
        if rest:
            self.pm._hookexec(hook, rest, kwargs, firstresult)
        values = outcomes_values(record)
        if firstresult:
            return values[0] if values else None
        return values

    def _settle(self, hook: str, outcome: HookOutcome, kwargs: Mapping[str, Any],
                record: list[HookOutcome]) -> None:
        """Record an outcome on the caller's thread: report it when it is a problem, trace it."""
        record.append(outcome)
        if outcome.status != "ok":
            self._report(hook, outcome.plugin, outcome, kwargs)
        if self.trace:
            self._trace(hook, outcome.plugin, outcome.seconds, outcome.status)

    def _in_batch(self, batch: _Batch, hook: str, plugin: str, call: Callable[[], Any],
                  check: Check | None) -> Any:
        """Run one implementation for :meth:`_run_batch`: inline on the runner when its lane is
        free (claimed meanwhile), else through the lane, behind the calls already there."""
        with batch.lock:
            if batch.abandoned:
                return None  # the caller took over and runs this one itself
            batch.started.add(plugin)
            batch.current, batch.start = plugin, time.perf_counter()
        lane = batch.lanes.get(plugin)
        if lane is None:  # an implementation that runs inline (see inline_of): here, in order
            result = run_here(call)
        elif lane.try_claim(hook):
            self._local.held = lane
            try:
                result = CallResult("ok", call())
            except Exception as exc:
                result = CallResult("error", error=exc)
            finally:
                self._local.held = None
                lane.release()
            result.seconds = time.perf_counter() - batch.start
        else:
            result = lane.call(call, batch.timeout, label=hook)
        outcome = HookOutcome(plugin, result.value, result.error, result.seconds, result.status)
        if outcome.status == "ok" and outcome.value is not None and check is not None:
            wrong = check(outcome.value)
            if wrong is not None:
                outcome.status, outcome.value, outcome.error = "bad_return", None, TypeError(wrong)
        with batch.lock:
            late = batch.abandoned
            batch.current = None
            if not late:
                batch.outcomes.append(outcome)
        if late:
            if outcome.error is not None:
                import logging

                logging.getLogger("hermes_core.lanes").error(
                    "%s: %s raised %s after its caller stopped waiting: %s",
                    lane.name if lane is not None else plugin, hook,
                    type(outcome.error).__name__, outcome.error)
            return None
        return outcome.value if outcome.status == "ok" else None

    def _queue_one(self, hook: str, plugin: str, call: Callable[[], Any], check: Check | None,
                   queued: _Queued, purpose: str | None) -> None:
        """Queue one implementation of a queued call; it reports its outcome once it has run."""
        kwargs = queued.kwargs

        def job() -> None:
            start = time.perf_counter()
            try:
                outcome = HookOutcome(plugin, call(), seconds=time.perf_counter() - start)
            except Exception as exc:
                outcome = HookOutcome(plugin, error=exc, seconds=time.perf_counter() - start,
                                      status="error")
            if outcome.value is not None and check is not None:
                wrong = check(outcome.value)
                if wrong is not None:
                    outcome.status, outcome.value = "bad_return", None
                    outcome.error = TypeError(wrong)
            if outcome.status != "ok":
                self._report(hook, plugin, outcome, kwargs)
            if self.trace:
                self._trace(hook, plugin, outcome.seconds, outcome.status)

        timeout = queued.timeout

        def late(status: OutcomeStatus) -> None:
            self._report(hook, plugin, HookOutcome(plugin, seconds=timeout, status=status), kwargs)
            if self.trace:
                self._trace(hook, plugin, timeout, status)

        if purpose is None:  # an unbounded hook has no lane: it runs here
            job()
            return
        lane = self.lanes.get(plugin, purpose, queued.shard)
        if queued.parts is not None:  # the backlog picks a runner or the lane at the end
            queued.parts.append((lane, job, timeout, late))
        else:
            queued.later.backlog.put(queued.ticket, lane, job, deadline=timeout, on_late=late)

    def current_plugin(self) -> str | None:
        """The plugin whose implementation runs on this thread now."""
        return getattr(self._local, "plugin", None)

    # ------------------------------------------------------------------------------ guarding

    def _guard(self, hook: str, impl: pluggy.HookImpl, lane: str | None,
               check: Check | None) -> pluggy.HookImpl:
        if impl.wrapper:
            function: Callable[..., Any] = self._guard_wrapper(hook, impl, lane, old_style=False)
        elif impl.hookwrapper:
            function = self._guard_wrapper(hook, impl, lane, old_style=True)
        else:
            function = self._guard_plain(hook, impl, lane, check)
        clone = pluggy.HookImpl(impl.plugin, impl.plugin_name, impl.function, impl.opts)
        setattr(clone, "function", function)  # noqa: B010 - Final for type checkers only
        return clone

    def _guard_plain(self, hook: str, impl: pluggy.HookImpl, lane: str | None,
                     check: Check | None) -> Callable[..., Any]:
        fn, plugin = impl.function, impl.plugin_name

        def guarded(*args: Any, **kwargs: Any) -> Any:
            def call() -> Any:
                previous = getattr(self._local, "plugin", None)
                self._local.plugin = plugin
                try:
                    return fn(*args, **kwargs)
                finally:
                    self._local.plugin = previous

            queued: _Queued | None = getattr(self._local, "queued", None)
            if queued is not None:  # host.hooks.later: queue it on the lane, do not wait
                self._queue_one(hook, plugin, call, check, queued, lane)
                return None
            batch: _Batch | None = getattr(self._local, "batch", None)
            if batch is not None:  # on a runner: the whole call is there (see _run_batch)
                return self._in_batch(batch, hook, plugin, call, check)
            record, call_kwargs = self._local.stack[-1]
            context = contextvars.copy_context()  # a lane runs it in the caller's context

            def run() -> Any:
                return context.run(call)

            the_lane = self._lane(plugin, lane, call_kwargs)
            if (the_lane is None or the_lane.owns_current_thread()
                    or the_lane is getattr(self._local, "held", None)):  # a runner holds its claim
                start = time.perf_counter()
                try:
                    result = CallResult("ok", run(), seconds=time.perf_counter() - start)
                except Exception as exc:
                    result = CallResult("error", error=exc, seconds=time.perf_counter() - start)
            else:
                result = the_lane.call(run, self._timeout_of(hook), label=hook)
            outcome = HookOutcome(plugin, result.value, result.error, result.seconds, result.status)
            if outcome.status == "ok" and outcome.value is not None and check is not None:
                wrong = check(outcome.value)
                if wrong is not None:
                    outcome.status, outcome.value = "bad_return", None
                    outcome.error = TypeError(wrong)
            record.append(outcome)
            if outcome.status != "ok":
                self._report(hook, plugin, outcome, call_kwargs)
            if self.trace:
                self._trace(hook, plugin, outcome.seconds, outcome.status)
            return outcome.value if outcome.status == "ok" else None

        return guarded

    def _guard_wrapper(self, hook: str, impl: pluggy.HookImpl, lane: str | None, *,
                       old_style: bool) -> Callable[..., Generator[Any, Any, Any]]:
        fn, plugin = impl.function, impl.plugin_name
        fix = ("a wrapper must yield exactly once; "
               + ("the yield receives a pluggy.Result" if old_style else
                  "`result = yield` receives the inner result and the wrapper returns it"))

        def fail(stage: str, exc: BaseException | None, kwargs: Mapping[str, Any]) -> None:
            detail = f"{type(exc).__name__}: {exc}" if exc is not None else stage
            outcome = HookOutcome(plugin, error=exc or RuntimeError(stage), status="error")
            self._report(hook, plugin, outcome, kwargs,
                         message=f"the wrapper {stage} ({detail}); it was treated as transparent "
                                 f"({fix})")

        def late(stage: str, result: CallResult, kwargs: Mapping[str, Any]) -> None:
            self._report(hook, plugin, HookOutcome(plugin, seconds=result.seconds,
                                                   status=result.status), kwargs)
            if self.trace:
                self._trace(hook, plugin, result.seconds, f"{result.status} ({stage})")

        def step(call: Callable[[], Any], context: contextvars.Context,
                 call_kwargs: Mapping[str, Any]) -> CallResult:
            """One part of the wrapper: on its plugin's lane under the hook's deadline."""
            the_lane = self._lane(plugin, lane, call_kwargs)
            if (the_lane is None or the_lane.owns_current_thread()
                    or the_lane is getattr(self._local, "held", None)):
                try:
                    return CallResult("ok", context.run(call))
                except Exception as exc:
                    return CallResult("error", error=exc)
            return the_lane.call(lambda: context.run(call), self._timeout_of(hook),
                                 label=f"{hook} (wrapper)")

        def guarded(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            call_kwargs = self._local.stack[-1][1]
            context = contextvars.copy_context()  # both parts run in the caller's context
            start = time.perf_counter()
            box: list[Generator[Any, Any, Any]] = []

            def begin() -> None:
                box.append(fn(*args, **kwargs))  # type: ignore[arg-type]
                next(box[0])

            first = step(begin, context, call_kwargs)
            if first.status in ("timed_out", "queued"):
                late("before its yield", first, call_kwargs)
                return (yield)
            if isinstance(first.error, StopIteration):
                fail("did not yield", None, call_kwargs)
                return (yield)
            if first.error is not None:
                fail("raised before its yield", first.error, call_kwargs)
                return (yield)
            gen = box[0]
            inner = yield
            sent = pluggy.Result(inner, None) if old_style else inner
            second = step(lambda: gen.send(sent), context, call_kwargs)
            if second.status in ("timed_out", "queued"):
                late("after its yield", second, call_kwargs)
                return inner
            if isinstance(second.error, StopIteration):
                if self.trace:
                    self._trace(hook, plugin, time.perf_counter() - start, "ok")
                return inner if old_style else second.error.value
            if second.error is not None:
                fail("raised after its yield", second.error, call_kwargs)
                return inner
            step(gen.close, context, call_kwargs)
            fail("yielded a second time", None, call_kwargs)
            return inner

        return guarded


def _never(plugin_name: str, plugin: object, hook: str) -> bool:
    return False


def _firstresult(caller: pluggy.HookCaller) -> bool:
    spec = caller.spec
    return bool(spec is not None and spec.opts.get("firstresult"))


def outcomes_values(outcomes: Sequence[HookOutcome]) -> list[Any]:
    """The values of the implementations that answered, in call order."""
    return [o.value for o in outcomes if o.status == "ok" and o.value is not None]
