"""Stand-in for ``agent.memory_provider``: the base class Hermes memory providers subclass.

The surface (method names, arguments, defaults) is Hermes Agent's as of 0.19.0, plus the helpers
newer Hermes versions added that published plugins already import (``RecallStatus``,
``is_trivial_prompt``, ``spawn_context_thread``). hermes-core calls these methods through its
bridge; nothing here runs a provider by itself.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MemoryProvider", "RecallStatus", "is_trivial_prompt", "spawn_context_thread"]


class MemoryProvider(ABC):
    """A Hermes memory provider. Subclasses implement the abstract members; the rest are
    optional and do nothing by default."""

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def is_available(self) -> bool: ...

    @abstractmethod
    def initialize(self, session_id: str, **kwargs: Any) -> None: ...

    @abstractmethod
    def get_tool_schemas(self) -> list[dict[str, Any]]: ...

    def system_prompt_block(self) -> str:
        return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        return ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        return None

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: list[dict[str, Any]] | None = None) -> None:
        return None

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        raise NotImplementedError(f"memory provider {self.name!r} has no tool {tool_name!r}")

    def shutdown(self) -> None:
        return None

    def on_turn_start(self, turn_number: int, message: str, **kwargs: Any) -> None:
        return None

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        return None

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "",
                          reset: bool = False, rewound: bool = False, **kwargs: Any) -> None:
        return None

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        return ""

    def on_delegation(self, task: str, result: str, *, child_session_id: str = "",
                      **kwargs: Any) -> None:
        return None

    def get_config_schema(self) -> list[dict[str, Any]]:
        return []

    def save_config(self, values: dict[str, Any], hermes_home: str) -> None:
        return None

    def on_memory_write(self, action: str, target: str, content: str,
                        metadata: dict[str, Any] | None = None) -> None:
        return None

    def backup_paths(self) -> list[str]:
        return []


@dataclass
class RecallStatus:
    """What a provider recalled for the last turn (shown by newer Hermes in its status line)."""

    provider_label: str = ""
    count: int = 0
    detail: str = ""


def is_trivial_prompt(text: str | None) -> bool:
    """Whether a user message is too slight to recall anything for (empty, or a bare
    acknowledgement such as "ok" or "thanks")."""
    words = (text or "").strip().lower().strip(".!?").split()
    if not words:
        return True
    return len(words) <= 2 and all(w in _TRIVIAL for w in words)


_TRIVIAL = frozenset({"ok", "okay", "k", "thanks", "thank", "you", "thx", "ty", "yes", "no", "yep",
                      "nope", "sure", "cool", "great", "nice", "hi", "hello", "hey", "bye"})


def spawn_context_thread(target: Callable[[], Any], *, name: str | None = None,
                         daemon: bool = True) -> threading.Thread:
    """A thread for a provider's background work (not started: the caller starts it)."""
    return threading.Thread(target=target, name=name, daemon=daemon)
