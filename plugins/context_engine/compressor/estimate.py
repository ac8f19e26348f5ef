"""What a compaction would do to a history, without doing it (for ``hermes-core context``).

Also reads histories from JSONL files: one message per line, as
``{"role": ..., "content": ..., "tool_calls": [...], "tool_call_id": ..., "tool_name": ...}``.
Tool calls may be hermes-style (``{"id", "name", "arguments": {...}}``) or OpenAI-style
(``{"id", "function": {"name", "arguments": "<json>"}}``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core.compaction.errors import ContextInputError
from hermes_core.compaction.markers import CLEARED_TOOL_OUTPUT
from hermes_core.compaction.tokens import MESSAGE_OVERHEAD, estimate_text
from hermes_core.models import window_source
from hermes_core.types import Message, ToolCall

from .summary import summary_budget

if TYPE_CHECKING:
    from .engine import Compressor

__all__ = ["describe_compaction", "message_from_dict", "read_jsonl"]

_ROLES = ("system", "user", "assistant", "tool")


def _tool_call(raw: Any, where: str) -> ToolCall:
    if not isinstance(raw, dict):
        raise ContextInputError(f"{where}: a tool call must be an object, got {type(raw).__name__}")
    function = raw.get("function")
    name = raw.get("name") or (function.get("name") if isinstance(function, dict) else None)
    args: Any = raw.get("arguments", raw.get("input"))
    if args is None and isinstance(function, dict):
        args = function.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {"raw": args}
    if not isinstance(name, str) or not name:
        raise ContextInputError(f"{where}: a tool call needs a 'name' (or 'function.name')")
    return ToolCall(id=str(raw.get("id") or ""), name=name, arguments=args if isinstance(args, dict) else {})


def message_from_dict(raw: Any, where: str = "message") -> Message:
    """A :class:`Message` from its JSON form; errors name ``where`` and the bad field."""
    if not isinstance(raw, dict):
        raise ContextInputError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    role = raw.get("role")
    if role not in _ROLES:
        raise ContextInputError(f"{where}: 'role' must be one of {', '.join(_ROLES)}, got {role!r}")
    content = raw.get("content", "")
    if isinstance(content, list):  # content blocks: keep their text
        content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise ContextInputError(f"{where}: 'content' must be a string, got {type(content).__name__}")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ContextInputError(f"{where}: 'tool_calls' must be a list")
    timestamp = raw.get("timestamp")
    meta = raw.get("meta")
    return Message(
        role=role,
        content=content,
        tool_calls=[_tool_call(c, f"{where}, tool call {i}") for i, c in enumerate(calls)],
        tool_call_id=raw.get("tool_call_id"),
        tool_name=raw.get("tool_name") or raw.get("name"),
        timestamp=float(timestamp) if isinstance(timestamp, (int, float)) else 0.0,
        meta=dict(meta) if isinstance(meta, dict) else {},
    )


def read_jsonl(path: Path) -> list[Message]:
    """Messages from a JSONL file; raises :class:`ContextInputError` naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContextInputError(f"{path}: cannot read the file: {exc}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise ContextInputError(
                f"{path}, line {number}: not valid JSON ({exc}); each line must be one message "
                'object like {"role": "user", "content": "..."}'
            ) from None
        out.append(message_from_dict(raw, f"{path}, line {number}"))
    return out


def _span(first: int, end: int) -> dict[str, Any]:
    return {"first": first, "last": end - 1, "messages": max(0, end - first)} if end > first else {
        "first": None, "last": None, "messages": 0}


def describe_compaction(engine: Compressor, messages: list[Message]) -> dict[str, Any]:
    """Token estimate, threshold, and what a compaction of ``messages`` would keep."""
    plan = engine.plan(messages)
    total = sum(plan.tokens) + engine.overhead_tokens
    cleared = [
        i for i in range(plan.tail_start)
        if messages[i].role == "tool" and len(messages[i].content) > engine.settings.prune_min_chars
        and messages[i].content != CLEARED_TOOL_OUTPUT
    ]
    marker = estimate_text(CLEARED_TOOL_OUTPUT) + MESSAGE_OVERHEAD
    kept = set(plan.kept)
    kept_tokens = plan.tokens_of(sorted(kept)) - sum(plan.tokens[i] - marker for i in cleared if i in kept)
    middle_tokens = plan.tokens_of(plan.middle)
    s = engine.settings
    budget = summary_budget(
        middle_tokens, engine.window, ratio=s.summary_ratio, minimum=s.summary_min_tokens,
        maximum=s.summary_max_tokens, window_fraction=s.summary_window_fraction,
    ) if plan.middle and plan.reason is None else 0
    return {
        "messages": len(messages),
        "tokens": total,
        "context_window": engine.window,
        "context_window_source": window_source(engine.context.config),
        "threshold": s.threshold,
        "threshold_tokens": engine.threshold_tokens,
        "over_threshold": total >= engine.threshold_tokens,
        "usage_percent": round(100.0 * total / engine.window, 1),
        "compaction": {
            "head": {**_span(0, plan.head_end), "tokens": plan.head_tokens},
            "pinned": {"indices": list(plan.pinned), "tokens": plan.tokens_of(plan.pinned)},
            "middle": {
                **_span(plan.head_end, plan.tail_start),
                "summarised": len(plan.middle),
                "tokens": middle_tokens,
            },
            "tail": {**_span(plan.tail_start, plan.n), "tokens": plan.tail_tokens},
            "old_tool_outputs_cleared": len(cleared),
            "summary_budget_tokens": budget,
            "tokens_after_estimate": kept_tokens + budget + engine.overhead_tokens,
            "nothing_to_compact": plan.reason,
        },
    }
