"""What went wrong in hook calls: :class:`HookOutcome` (one implementation, one call),
:class:`HookProblem` (one that raised, was late or answered the wrong type) and
:class:`ProblemLog`, the part of the hook engine that logs, keeps, traces and hands problems to
listeners."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["HookOutcome", "HookProblem", "OutcomeStatus", "ProblemLog"]

OutcomeStatus = Literal["ok", "error", "timed_out", "queued", "bad_return"]

@dataclass(slots=True)
class HookOutcome:
    """What one implementation did in one hook call."""

    plugin: str  #: the plugin-manager name (``memory-provider:file_memory``, a module plugin's name)
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0
    status: OutcomeStatus = "ok"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(slots=True, frozen=True)
class HookProblem:
    """An implementation that raised, was late, or returned the wrong type."""

    hook: str
    plugin: str
    status: OutcomeStatus
    message: str
    session_id: str | None = None
    #: what the implementation raised (or the TypeError describing a wrong return)
    error: BaseException | None = None


class ProblemLog:
    """Problems of one hook engine: logged, kept (bounded), traced, passed to listeners."""

    _timeout_of: Callable[[str], float]

    def __init__(self) -> None:
        self._plock = threading.Lock()
        #: the most recent problems, oldest first (bounded); ``problem_count`` counts them all
        self.problems: deque[HookProblem] = deque(maxlen=1000)
        self.problem_count = 0
        self._listeners: list[Callable[[HookProblem], None]] = []
        self.trace = os.environ.get("HERMES_CORE_TRACE_PLUGINS", "") not in ("", "0")

    def subscribe(self, listener: Callable[[HookProblem], None]) -> Callable[[], None]:
        """Call ``listener`` with every problem from now on (on the thread that saw it)."""
        with self._plock:
            self._listeners.append(listener)

        def undo() -> None:
            with self._plock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return undo

    def report_late(self, hook: str, plugin: str, *, queued: bool, deadline: float, setting: str,
                    kwargs: Mapping[str, Any]) -> None:
        """Report an implementation that a caller with its own deadline stopped waiting for (the
        prefetch runner's lanes): the same log line and problem as a late call of any hook.
        ``queued``: it was still busy with an earlier late call and was not called again."""
        outcome = HookOutcome(plugin, seconds=deadline, status="queued" if queued else "timed_out")
        self._report(hook, plugin, outcome, kwargs, deadline=(deadline, setting))
        if self.trace:
            self._trace(hook, plugin, outcome.seconds, outcome.status)

    def _report(self, hook: str, plugin: str, outcome: HookOutcome, kwargs: Mapping[str, Any],
                message: str | None = None, *, deadline: tuple[float, str] | None = None) -> None:
        seconds, setting = deadline or (self._timeout_of(hook), f"hooks.timeouts.{hook}")
        if message is not None:
            text = f"plugin {plugin} in hook {hook}: {message}"
        elif outcome.status == "error":
            text = (f"plugin {plugin} raised {type(outcome.error).__name__} in hook {hook}: "
                    f"{outcome.error}")
        elif outcome.status == "bad_return":
            text = f"plugin {plugin}: hook {hook} returned the wrong type: {outcome.error}"
        elif outcome.status == "timed_out":
            text = (f"plugin {plugin} did not answer hook {hook} within its deadline "
                    f"({seconds:g} s; raise {setting} if it needs longer); the caller went on "
                    "without it, and the call still runs")
        else:
            text = (f"plugin {plugin} is still busy with an earlier late call; hook {hook} was "
                    "queued behind it and the caller did not wait")
        problem = HookProblem(hook, plugin, outcome.status, text, _session_id(kwargs), outcome.error)
        level = logging.WARNING if outcome.status in ("timed_out", "queued") else logging.ERROR
        logging.getLogger("hermes_core.hooks").log(
            level, "%s", problem.message,
            exc_info=(outcome.error if outcome.error is not None
                      and logging.getLogger("hermes_core").isEnabledFor(logging.DEBUG) else None))
        with self._plock:
            self.problems.append(problem)
            self.problem_count += 1
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(problem)
            except Exception:  # pragma: no cover - kernel listeners are simple appends
                logging.getLogger("hermes_core.hooks").exception("problem listener failed")

    def _trace(self, hook: str, plugin: str, seconds: float, status: str) -> None:
        print(f"hermes-core trace: {hook} {plugin} {seconds * 1000:.3f} ms {status}",
              file=sys.stderr, flush=True)


def _session_id(kwargs: Mapping[str, Any]) -> str | None:
    session = (kwargs.get("session") or kwargs.get("new_session")
               or getattr(kwargs.get("agent"), "session", None))  # the agent's own hooks
    return getattr(session, "id", None)
