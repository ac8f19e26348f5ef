"""One conversation's place in a :class:`~hermes_core.dispatch.ConversationDispatcher`: its
agent while live and the ticket queue that orders its turns, and where its cross-node lock comes
from when ``storage.url`` names a shared database. Private to the dispatcher.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import Agent
    from .host import PluginHost

__all__ = ["Slot", "shared_locks"]


@dataclass(eq=False)
class Slot:
    """One conversation: its agent (when live) and the ticket queue that orders its turns."""

    platform: str
    key: str
    agent: Agent | None = None
    #: callers holding or waiting for a ticket; a slot in use is never evicted or dropped
    users: int = 0
    last_used: float = field(default_factory=time.monotonic)
    next_ticket: int = 0
    serving: int = 0
    abandoned: set[int] = field(default_factory=set)
    #: the stores' erasure generation the agent was built under (None: not known)
    generation: int | None = None
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait_turn(self, ticket: int, timeout: float | None = None) -> bool:
        """Block until ``ticket`` is served; False (the ticket given up) when ``timeout`` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while self.serving != ticket:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self.abandoned.add(ticket)
                    return False
                self.cond.wait(left)
            return True

    def done(self) -> None:
        """Serve the next ticket, skipping those whose callers gave up."""
        with self.cond:
            self.serving += 1
            while self.serving in self.abandoned:
                self.abandoned.discard(self.serving)
                self.serving += 1
            self.cond.notify_all()


def shared_locks(host: PluginHost) -> Any:
    """Cross-node conversation locks when ``storage.url`` names a shared database."""
    storage = getattr(getattr(host, "config", None), "core", None)
    url_text = getattr(getattr(storage, "storage", None), "url", None)
    from .storage import resolve_storage_url

    url = resolve_storage_url(url_text)
    if url is None:
        return None
    from .storage.locks import ConversationLocks

    return ConversationLocks(url)
