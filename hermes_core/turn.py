"""What a tool may know of the turn it runs in: :class:`TurnContext` and :class:`CancelToken`.

The agent loop hands every tool call a :class:`TurnContext` (``ToolContext.turn``): the
:class:`~hermes_core.agent.Agent` running the turn, the turn's
:class:`~hermes_core.toolrun.IterationBudget` (shared with any child it delegates to), the
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
    from .toolrun import IterationBudget

__all__ = ["CancelToken", "TurnContext"]


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


@dataclass(slots=True)
class TurnContext:
    """The running turn, as its tools see it (``ToolContext.turn``)."""

    agent: Agent
    budget: IterationBudget
    cancel: CancelToken
    #: 0 for the user's own agent, 1 for its children, ...
    depth: int = 0
