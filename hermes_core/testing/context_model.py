"""A model of the Messages API's context management, for the loopback server.

This is **not** the platform: it is a small, deterministic rule that does what the edits declare,
so tests and benchmarks can see what the kernel sends and what a server applying the edits would
keep. Sizes are the loopback server's rough count (a quarter of the JSON's characters).

* ``clear_tool_uses_20250919``: once the prompt reaches ``trigger`` (``input_tokens``, default
  100,000; or ``tool_uses``: that many tool uses), the contents of the oldest ``tool_result``
  blocks are replaced by a short placeholder, keeping the newest ``keep`` tool uses (default 3)
  and the results of ``exclude_tools``; nothing is cleared when less than ``clear_at_least``
  tokens would go.
* ``compact_20260112``: the server reads nothing before the last ``compaction`` block (its
  summary stands for it). When it compacts is up to the test's script (``Reply(compaction=...)``).

The edits are accepted only with the ``anthropic-beta`` header each needs, as the API requires.
"""

from __future__ import annotations

import copy
import json
from typing import Any

__all__ = ["CLEARED", "apply_context_management", "context_problem", "rough_tokens"]

#: what a cleared tool result holds in this model
CLEARED = "[cleared]"
_BETAS = {
    "clear_tool_uses_20250919": "context-management-2025-06-27",
    "clear_thinking_20251015": "context-management-2025-06-27",
    "compact_20260112": "compact-2026-01-12",
}


def rough_tokens(body: dict[str, Any]) -> int:
    """The loopback server's count of a request: its messages and system prompt, / 4."""
    size = len(json.dumps(body.get("messages", []))) + len(json.dumps(body.get("system", "")))
    return max(1, size // 4)


def context_problem(body: dict[str, Any], beta_header: str) -> str | None:
    """What the API would refuse in ``body["context_management"]``, or None."""
    config = body.get("context_management")
    if config is None:
        return None
    edits = config.get("edits") if isinstance(config, dict) else None
    if not isinstance(edits, list):
        return "context_management.edits: Field required"
    betas = {b.strip() for b in beta_header.split(",") if b.strip()}
    for i, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        if kind not in _BETAS:
            return f"context_management.edits.{i}.type: unknown edit type {kind!r}"
        if _BETAS[kind] not in betas:
            return (f"context_management.edits.{i}: {kind} requires the anthropic-beta header "
                    f"{_BETAS[kind]!r}")
    return None


def _after_compaction(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages the server reads: from the last compaction block on."""
    for index in range(len(messages) - 1, -1, -1):
        content = messages[index].get("content")
        if isinstance(content, list):
            for pos, block in enumerate(content):
                if isinstance(block, dict) and block.get("type") == "compaction":
                    kept = {**messages[index], "content": content[pos:]}
                    return [kept, *messages[index + 1:]]
    return messages


def apply_context_management(body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(the body the model reads, applied_edits)`` for ``body``; ``body`` is not changed."""
    config = body.get("context_management") or {}
    out = {**body, "messages": _after_compaction(list(body.get("messages", [])))}
    applied: list[dict[str, Any]] = []
    for edit in config.get("edits", []) if isinstance(config, dict) else []:
        if isinstance(edit, dict) and edit.get("type") == "clear_tool_uses_20250919":
            out, report = _clear_tool_uses(out, edit)
            if report is not None:
                applied.append(report)
    return out, applied


def _clear_tool_uses(body: dict[str, Any], edit: dict[str, Any]
                     ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    messages = body["messages"]
    names: dict[str, str] = {}
    results: list[tuple[int, int]] = []  # (message, block) of each tool_result, oldest first
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result":
                results.append((i, j))
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": 100_000}
    size = rough_tokens(body)
    reached = (len(results) >= int(trigger["value"]) if trigger.get("type") == "tool_uses"
               else size >= int(trigger["value"]))
    keep = int((edit.get("keep") or {}).get("value", 3))
    excluded = set(edit.get("exclude_tools") or ())
    candidates = results[:max(0, len(results) - keep)]
    if not reached or not candidates:
        return body, None
    cleared = copy.deepcopy(messages)
    count = 0
    for i, j in candidates:
        block = cleared[i]["content"][j]
        if names.get(str(block.get("tool_use_id"))) in excluded or block.get("content") == CLEARED:
            continue
        block["content"] = CLEARED
        count += 1
    new_body = {**body, "messages": cleared}
    gone = size - rough_tokens(new_body)
    least = int((edit.get("clear_at_least") or {}).get("value", 0))
    if count == 0 or gone < least:
        return body, None
    return new_body, {"type": "clear_tool_uses_20250919", "cleared_tool_uses": count,
                      "cleared_input_tokens": gone}
