"""What a tool may know of the turn it runs in: :class:`TurnContext` and :class:`CancelToken`.

The agent loop hands every tool call a :class:`TurnContext` (``ToolContext.turn``): the
:class:`~hermes_core.agent.Agent` running the turn, the turn's
:class:`IterationBudget` (shared with any child it delegates to), the
delegation depth and a :class:`CancelToken`. A tool that starts long work of its own (a delegated
child agent) watches the token: it is cancelled when the turn is (:meth:`Agent.cancel
<hermes_core.agent.Agent.cancel>`) and when the call passes its deadline (``hooks.tool_timeout``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["CancelToken", "IterationBudget", "TurnContext"]


class CancelToken:
    """A one-way flag: set once (with a reason), seen by this token and every token made from it."""

    def __init__(self, parent: CancelToken | None = None) -> None:
        self.parent = parent
        self._event = threading.Event()
        self._reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the flag; the first reason given is kept."""
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or (self.parent is not None and self.parent.cancelled)

    @property
    def reason(self) -> str:
        """Why it was cancelled (its own reason, else its parent's); ``""`` while not cancelled."""
        if self._event.is_set():
            return self._reason
        return self.parent.reason if self.parent is not None else ""

    def child(self) -> CancelToken:
        """A token cancelled with this one, and also on its own."""
        return CancelToken(self)


class IterationBudget:
    """LLM calls allowed in one turn, and the notes that tell the model the budget is running out.

    One budget is shared by a turn and the children it delegates to: a child's budget
    (:meth:`child`) has its own limit and also takes each call from its parent, which always keeps
    one call back for its own answer. :meth:`take` is atomic, so children running in parallel
    never overdraw it.
    """

    WRAP_UP = 0.7
    RESPOND_NOW = 0.9

    def __init__(self, limit: int = 90, *, parent: IterationBudget | None = None) -> None:
        if limit < 1:
            raise ValueError(f"the iteration budget must be at least 1, got {limit}")
        self.limit = limit
        self.used = 0
        self.parent = parent
        self._lock = threading.Lock()

    def child(self, limit: int) -> IterationBudget:
        """A budget for a delegated child: at most ``limit`` calls, each also spent here."""
        return IterationBudget(limit, parent=self)

    def take(self, reserve: int = 0) -> bool:
        """Count one LLM call before it is made; False (nothing counted) when no call is left
        beyond ``reserve`` here or in a parent."""
        with self._lock:
            if self.used + 1 + reserve > self.limit:
                return False
            if self.parent is not None and not self.parent.take(reserve=1):
                return False
            self.used += 1
            return True

    def spend(self) -> None:
        """Count one LLM call (whatever is left)."""
        with self._lock:
            self.used += 1

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit or (self.parent is not None and self.parent.remaining <= 1)

    def note(self) -> str | None:
        """The note for the tool results that follow the current call, or ``None``."""
        if self.exhausted:
            spent = (f"all {self.limit} model calls of this turn are used" if self.parent is None
                     else f"this task's share of the delegating agent's budget is used "
                          f"({self.used} model calls here)")
            return f"[Budget: {spent}. No more tools will run; the turn ends here.]"
        # the fuller of this budget and the shared one above it decides
        used, limit = self.used, self.limit
        level = used / limit
        budget = self.parent
        while budget is not None:
            if budget.used / budget.limit > level:
                used, limit, level = budget.used, budget.limit, budget.used / budget.limit
            budget = budget.parent
        if used >= round(limit * self.RESPOND_NOW):
            return (
                f"[Budget: {used} of {limit} model calls of this turn used. Respond now: "
                "stop calling tools and give the user your answer with what you have.]"
            )
        if used >= round(limit * self.WRAP_UP):
            return (
                f"[Budget: {used} of {limit} model calls of this turn used. Wrap up: "
                "finish the current step and answer soon; avoid starting new work.]"
            )
        return None


@dataclass(slots=True)
class TurnContext:
    """The running turn, as its tools see it (``ToolContext.turn``)."""

    agent: Agent
    budget: IterationBudget
    cancel: CancelToken
    #: 0 for the user's own agent, 1 for its children, ...
    depth: int = 0
