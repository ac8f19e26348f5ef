"""Stand-in for ``agent.context_engine``: the base class Hermes context engines subclass.

Same surface as Hermes Agent 0.19.0's, plus the optional methods newer Hermes versions added, with
their defaults (``should_compress_info``, ``prune_tool_results_only``, ``select_context``,
``on_turn_complete``, ``pending_compression_operation``,
``get_automatic_compaction_status_message``; ``emit_automatic_compaction_status``), so an engine
written for a newer Hermes that calls one of them on itself (or through ``super()``) runs; the
bridge calls none of them (hermes-core has no hook at those points). Engines built on Hermes'
concrete ``ContextCompressor`` (``agent.context_compressor``) are not served: they need
hermes-agent itself.

Newer Hermes' module-level helpers an engine imports are here too: ``MEMORY_CONTEXT_MAX_CHARS``,
``sanitize_memory_context`` (secrets masked, then the middle cut out of a text over the limit) and
``automatic_compaction_status_message`` (the status line an engine lets the host show).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from typing import Any

__all__ = ["MEMORY_CONTEXT_MAX_CHARS", "ContextEngine", "automatic_compaction_status_message",
           "sanitize_memory_context"]

#: the longest memory context an engine passes on (newer Hermes' figure)
MEMORY_CONTEXT_MAX_CHARS = 6_000
_KEEP_HEAD, _KEEP_TAIL = 4_000, 1_500
_CUT = "\n...[memory provider context truncated]...\n"
_MASK = "***"
#: credentials recognisable by their shape: vendor key prefixes, bearer tokens, JWTs, PEM keys
_SHAPED = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|hf_[A-Za-z0-9]{20,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)
_BEARER = re.compile(r"(?i)\b(bearer|token|basic)(\s+)[A-Za-z0-9._~+/=-]{12,}")
#: NAME=value / "name": "value" / name: value where the name says it holds a secret
_NAMED = re.compile(
    r"(?i)([\"']?[\w.-]*(?:api[_.-]?key|token|secret|passw(?:or)?d|credential|auth)[\w.-]*"
    r"[\"']?\s*[:=]\s*)([\"']?)([^\s\"',;&]{4,})\2")
_URL_USER = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)([^\s/@]+)(@)", re.IGNORECASE)
_URL_PARAM = re.compile(
    r"(?i)([?&](?:[\w-]*(?:key|token|secret|signature|password|sig|code)[\w-]*)=)([^&\s#]+)")


def _redacted(text: str) -> str:
    text = _SHAPED.sub(_MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}", text)
    text = _URL_USER.sub(lambda m: f"{m.group(1)}{_MASK}{m.group(3)}", text)
    text = _URL_PARAM.sub(lambda m: f"{m.group(1)}{_MASK}", text)
    return _NAMED.sub(lambda m: f"{m.group(1)}{m.group(2)}{_MASK}{m.group(2)}", text)


def sanitize_memory_context(memory_context: str) -> str:
    """``memory_context`` as it may leave for a model: trimmed, credentials masked (key shapes,
    bearer tokens, secret-named settings, a URL's password and secret-named parameters), and,
    over :data:`MEMORY_CONTEXT_MAX_CHARS`, its first 4,000 and last 1,500 characters around a
    marker saying it was cut."""
    text = _redacted(str(memory_context or "").strip())
    if len(text) <= MEMORY_CONTEXT_MAX_CHARS:
        return text
    return text[:_KEEP_HEAD] + _CUT + text[-_KEEP_TAIL:]


def automatic_compaction_status_message(engine: Any, *, phase: str, default_message: str,
                                        **context: Any) -> str | None:
    """The status line of an automatic compaction, as ``engine`` wants it shown: ``None`` when
    it keeps them silent (``emit_automatic_compaction_status = False``, or its
    ``get_automatic_compaction_status_message`` answers nothing), else that answer, stripped."""
    if not getattr(engine, "emit_automatic_compaction_status", True):
        return None
    custom = getattr(engine, "get_automatic_compaction_status_message", None)
    answer = (custom(phase=phase, default_message=default_message, **context)
              if callable(custom) else default_message)
    return (str(answer).strip() or None) if answer is not None else None


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
