"""Stand-in for ``agent.context_engine``: the base class Hermes context engines subclass.

Same surface as Hermes Agent 0.19.0's, plus the optional methods newer Hermes versions added, with
their defaults (``should_compress_info``, ``prune_tool_results_only``, ``select_context``,
``on_turn_complete``, ``pending_compression_operation``,
``get_automatic_compaction_status_message``; ``emit_automatic_compaction_status``), so an engine
written for a newer Hermes that calls one of them on itself (or through ``super()``) runs; the
bridge calls none of them (hermes-core has no hook at those points). Engines built on Hermes'
concrete ``ContextCompressor`` (``agent.context_compressor``) are not served: they need
hermes-agent itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["ContextEngine"]


class ContextEngine(ABC):
    """A Hermes context engine: decides when to compact the history and does it."""

    last_prompt_tokens: int = 0
    last_completion_tokens: int = 0
    last_total_tokens: int = 0
    threshold_tokens: int = 0
    context_length: int = 0
    compression_count: int = 0
    threshold_percent: float = 0.75
    protect_first_n: int = 3
    protect_last_n: int = 6
    #: newer Hermes: False keeps a successful automatic compaction silent
    emit_automatic_compaction_status: bool = True

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def update_from_response(self, usage: dict[str, Any]) -> None: ...

    @abstractmethod
    def should_compress(self, prompt_tokens: int | None = None) -> bool: ...

    @abstractmethod
    def compress(self, messages: list[dict[str, Any]], current_tokens: int | None = None,
                 focus_topic: str | None = None, force: bool = False,
                 memory_context: str = "") -> list[dict[str, Any]]: ...

    def should_compress_info(self, prompt_tokens: int | None = None) -> tuple[bool, str | None]:
        return self.should_compress(prompt_tokens), None

    def prune_tool_results_only(self, messages: list[dict[str, Any]],
                                current_tokens: int | None = None
                                ) -> tuple[list[dict[str, Any]], int]:
        return messages, 0

    def select_context(self, request_messages: list[dict[str, Any]], *,
                       conversation_messages: list[dict[str, Any]] | None = None,
                       incoming_message: dict[str, Any] | None = None,
                       budget_tokens: int = 0) -> list[dict[str, Any]] | None:
        return None

    def on_turn_complete(self, messages: list[dict[str, Any]],
                         usage: dict[str, Any] | None = None, **kwargs: Any) -> None:
        return None

    def pending_compression_operation(self, messages: list[dict[str, Any]]) -> str | None:
        return None

    def get_automatic_compaction_status_message(self, *, phase: str, default_message: str,
                                                **context: Any) -> str | None:
        return default_message if self.emit_automatic_compaction_status else None

    def should_compress_preflight(self, messages: list[dict[str, Any]]) -> bool:
        return False

    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
        return False

    def has_content_to_compress(self, messages: list[dict[str, Any]]) -> bool:
        return True

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        return None

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        return None

    def on_session_reset(self) -> None:
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def handle_tool_call(self, name: str, args: dict[str, Any], **kwargs: Any) -> str:
        import json

        return json.dumps({"error": f"context engine {self.name!r} has no tool {name!r}"})

    def get_status(self) -> dict[str, Any]:
        last = max(self.last_prompt_tokens, 0)
        share = min(100.0, last / self.context_length * 100) if self.context_length else 0
        return {"last_prompt_tokens": last, "threshold_tokens": self.threshold_tokens,
                "context_length": self.context_length, "usage_percent": share,
                "compression_count": self.compression_count}

    def update_model(self, model: str, context_length: int, base_url: str = "",
                     api_key: str = "", provider: str = "", api_mode: str = "") -> None:
        self.context_length = context_length
        self.threshold_tokens = int(context_length * self.threshold_percent)
