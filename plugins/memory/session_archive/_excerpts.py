"""The messages of a conversation window as the ``session_search`` tool shows them: placed on
the matches (window.py), each message capped (a match around its match), tool calls shortened."""

from __future__ import annotations

import json
from typing import Any

from .query import SearchPlan
from .search import find_match, full_content
from .store import SessionArchive
from .window import place_window

__all__ = ["HIT_CHARS", "MESSAGE_CHARS", "OVERHEAD", "cap", "conversation_window", "shown_calls"]

#: a window shows at most this much of a matching message (around the match) ...
HIT_CHARS = 6000
#: ... and of any other message (its start)
MESSAGE_CHARS = 1500
#: tool-call arguments shown per call
ARGS_CHARS = 600
#: JSON keys and punctuation per message, counted against the budget
OVERHEAD = 40


def cap(text: str, limit: int, around: int = -1) -> str:
    """``text`` cut to ``limit`` characters (from ``around``'s neighbourhood when given)."""
    if len(text) <= limit:
        return text
    if around < 0:
        return text[:limit] + f" …[{len(text) - limit:,} more characters]"
    start = max(0, min(around - limit // 3, len(text) - limit))
    end = start + limit
    return (f"[{start:,} characters before] …" if start else "") + text[start:end] + (
        f"… [{len(text) - end:,} more characters]" if end < len(text) else "")


def shown_calls(raw: str | None) -> list[dict[str, Any]] | None:
    """A message's stored tool calls with their arguments capped (None: it has none)."""
    if not raw:
        return None
    try:
        calls = json.loads(raw)
    except ValueError:
        return [{"arguments": raw[:ARGS_CHARS]}]
    out = []
    for c in calls if isinstance(calls, list) else [calls]:
        c = c if isinstance(c, dict) else {"arguments": c}
        args = c.get("arguments")
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        out.append({"name": c.get("name"), "arguments": cap(text, ARGS_CHARS)})
    return out


def _rows(archive: SessionArchive, ids: list[int]) -> dict[int, tuple[Any, ...]]:
    """Each message's id, role, content (its first 400,000 characters), tool name, tool calls
    and whether the content is longer (one query per 500 ids)."""
    return {r[0]: r for r in archive.read_in(
        "SELECT id, role, substr(content, 1, 400000), tool_name, tool_calls, "
        "length(content) > 400000 FROM messages WHERE id IN ({marks})", ids, chunk=500)}


def _message(archive: SessionArchive, r: tuple[Any, ...], plan: SearchPlan, is_hit: bool,
             limit: int) -> dict[str, Any]:
    """One message of a window, capped at ``limit`` (a hit's around its match)."""
    mid, content = r[0], r[2] or ""
    around = find_match(content, plan.needles) if is_hit else -1
    if is_hit and around == -1 and r[5]:
        content = full_content(archive, mid)  # a huge message matched beyond its start
        around = find_match(content, plan.needles)
    item: dict[str, Any] = {"id": mid, "role": r[1], "content": cap(content, limit, around)}
    if r[3]:
        item["tool_name"] = r[3]
    calls = shown_calls(r[4])
    if calls:
        item["tool_calls"] = calls
    if is_hit:
        item["match"] = True
    return item


def conversation_window(
    archive: SessionArchive, hit_ids: list[int], plan: SearchPlan, budget: int,
    skeleton: list[tuple[int, str, int]], hit_chars: int = HIT_CHARS,
    message_chars: int = MESSAGE_CHARS,
) -> dict[str, Any]:
    """The messages of ``skeleton`` (id, role, length) that fit ``budget``, placed on the hits."""
    pos = {mid: i for i, (mid, _r, _n) in enumerate(skeleton)}
    hit_set = set(hit_ids)
    lengths = [min(n, hit_chars if mid in hit_set else message_chars) + OVERHEAD
               for mid, _role, n in skeleton]
    start, end = place_window(lengths, [pos[h] for h in hit_ids if h in pos], budget)
    ids = [mid for mid, _r, _n in skeleton[start:end]]
    rows = _rows(archive, ids)
    messages = [_message(archive, rows[mid], plan, mid in hit_set,
                         hit_chars if mid in hit_set else message_chars) for mid in ids]
    out: dict[str, Any] = {"messages_before": start, "messages_after": len(skeleton) - end,
                           "messages": messages}
    if start > 0:
        out["earlier_message_id"] = skeleton[start - 1][0]
    if end < len(skeleton):
        out["later_message_id"] = skeleton[end][0]
    return out
