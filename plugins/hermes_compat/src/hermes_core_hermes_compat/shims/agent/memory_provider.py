"""Stand-in for ``agent.memory_provider``: the base class Hermes memory providers subclass.

The surface (method names, arguments, defaults) is Hermes Agent's as of 0.19.0, plus what newer
Hermes versions added that published plugins already import: the helpers ``RecallStatus`` (with
``INDICATOR_GLYPH``), ``is_trivial_prompt`` (with ``TRIVIAL_PROMPT_RE``), ``spawn_context_thread``
and ``ctx_bound``, the constant ``PRE_COMPRESS_CHECKPOINT_API_VERSION``, and the optional methods
``initialize_for_inspection``, ``unavailable_reason`` and ``recall_status``, each with newer
Hermes' default. hermes-core calls these methods through its bridge; nothing here runs a
provider by itself.
"""

from __future__ import annotations

import contextvars
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["INDICATOR_GLYPH", "PRE_COMPRESS_CHECKPOINT_API_VERSION", "TRIVIAL_PROMPT_RE",
           "MemoryProvider", "RecallStatus", "ctx_bound", "is_trivial_prompt",
           "spawn_context_thread"]

#: the version of newer Hermes' fail-closed ``on_pre_compress`` checkpoint contract; a provider
#: opting in sets ``pre_compress_checkpoint_api_version`` to it (the bridge calls
#: ``on_pre_compress(messages)`` as 0.19.0 does, the version-1 contract)
PRE_COMPRESS_CHECKPOINT_API_VERSION = 2

#: the mark a recall indicator leads with, unless a provider's :class:`RecallStatus` names one
INDICATOR_GLYPH = "\N{BRAIN}"


class MemoryProvider(ABC):
    """A Hermes memory provider. Subclasses implement the abstract members; the rest are
    optional and do nothing by default."""

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def is_available(self) -> bool: ...

    #: newer Hermes: 2 opts into its checkpoint contract for ``on_pre_compress``
    pre_compress_checkpoint_api_version = 1

    @abstractmethod
    def initialize(self, session_id: str, **kwargs: Any) -> None: ...

    def initialize_for_inspection(self, session_id: str, **kwargs: Any) -> None:
        self.initialize(session_id=session_id, **kwargs)

    def unavailable_reason(self) -> str:
        return ""

    def recall_status(self) -> RecallStatus | None:
        return None

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


@dataclass(frozen=True)
class RecallStatus:
    """What a provider's last prefetch put into the turn (newer Hermes shows it as a status
    line; hermes-core shows none): how many memories (0: text without a count), and the mark."""

    provider_label: str
    count: int
    glyph: str = INDICATOR_GLYPH


#: a user message with nothing to recall for: a bare acknowledgement or greeting, followed by
#: nothing but spaces and punctuation ("thanks!", "go ahead.", but not "k8s" or "ok ok")
TRIVIAL_PROMPT_RE = re.compile(
    r"^(?:yes|no|ok|okay|sure|thanks|thank you|y|n|yep|nope|yeah|nah|hi|hey|hello|yo|sup|"
    r"continue|go ahead|do it|proceed|got it|cool|nice|great|done|next|lgtm|k)"
    "[\\s!?.:;,\"'~\u2018\u2019\u201c\u201d\u2014\u2013\u2026()\\[\\]{}<>*&^%$#@+=`\u00a0]*$",
    re.IGNORECASE)


def is_trivial_prompt(text: str | None) -> bool:
    """Whether a user message is too slight to recall anything for: empty, a slash command, or
    a bare acknowledgement (:data:`TRIVIAL_PROMPT_RE`)."""
    stripped = (text or "").strip()
    return not stripped or stripped.startswith("/") or bool(TRIVIAL_PROMPT_RE.match(stripped))


def ctx_bound(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` bound to the caller's context variables: called later on any thread, it runs in a
    copy of them (so it keeps the caller's Hermes home)."""
    captured = contextvars.copy_context()

    def bound(*args: Any, **kwargs: Any) -> Any:
        return captured.copy().run(fn, *args, **kwargs)
    return bound


def spawn_context_thread(target: Callable[..., Any], *, name: str | None = None,
                         daemon: bool = True, args: tuple[Any, ...] = (),
                         kwargs: Mapping[str, Any] | None = None) -> threading.Thread:
    """A thread (not started: the caller starts it) running ``target(*args, **kwargs)`` in a
    copy of the caller's context variables, so it keeps the caller's Hermes home (the bridge sets
    each plugin's, and each user's, per call)."""
    return threading.Thread(target=ctx_bound(target), args=args, kwargs=dict(kwargs or {}),
                            name=name, daemon=daemon)
