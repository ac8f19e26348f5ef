"""What a search shows of the messages it found: a snippet of each hit with one message of
context either side (:func:`hits_for`), and the messages of a conversation window as the
``session_search`` tool shows them: placed on the matches (window.py), each message capped (a
match around its match), tool calls shortened."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from .query import SearchPlan
from .records import Candidate
from .store import SessionArchive
from .window import place_window

__all__ = ["HIT_CHARS", "MESSAGE_CHARS", "OVERHEAD", "Hit", "cap", "conversation_window", "find_match",
           "full_content", "hits_for", "make_snippet", "shown_calls"]

#: a window shows at most this much of a matching message (around the match) ...
HIT_CHARS = 6000
#: ... and of any other message (its start)
MESSAGE_CHARS = 1500
#: tool-call arguments shown per call
ARGS_CHARS = 600
#: JSON keys and punctuation per message, counted against the budget
OVERHEAD = 40
#: a hit's neighbours show this much of their content
CONTEXT_CHARS = 200
SNIPPET_CHARS = 240


@dataclass(slots=True)
class Hit:
    """One matching message with a snippet and its neighbours."""

    message_id: int
    session_id: str
    role: str
    snippet: str
    timestamp: float
    score: float
    tool_name: str | None = None
    session_title: str | None = None
    platform: str | None = None
    context_before: dict[str, Any] | None = None
    context_after: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


_WORD_EDGE = re.compile(r"\w+", re.UNICODE)


def _needle_variants(needles: list[str]) -> list[str]:
    """Search strings for snippets: each needle, and a stem-ish prefix for inflected forms."""
    out: list[str] = []
    for n in needles:
        out.append(n)
        words = _WORD_EDGE.findall(n)
        if len(words) == 1 and len(n) > 5:
            out.append(n[: max(4, len(n) - 3)])
    return [o for o in out if o]


def find_match(text: str, needles: list[str]) -> int:
    """The position of the first needle (case-insensitive) in ``text``, or -1."""
    low = text.lower()
    best = -1
    for needle in _needle_variants(needles):
        pos = low.find(needle)
        if pos != -1 and (best == -1 or pos < best):
            best = pos
    return best


def make_snippet(text: str, needles: list[str], width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around its first match."""
    pos = find_match(text, needles)
    if pos == -1:
        pos = 0
    start = max(0, pos - width // 3)
    end = min(len(text), start + width)
    start = max(0, end - width)
    out = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + out + ("…" if end < len(text) else "")


def _short(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    content = row[2] or ""
    out: dict[str, Any] = {"message_id": row[0], "role": row[1],
                           "content": content[:CONTEXT_CHARS] + ("…" if len(content) > CONTEXT_CHARS
                                                                 else "")}
    if row[3]:
        out["tool_name"] = row[3]
    return out


def full_content(archive: SessionArchive, message_id: int) -> str:
    rows = archive.db.read("SELECT content FROM messages WHERE id = ?", (message_id,))
    return str(rows[0][0]) if rows else ""


def hits_for(
    archive: SessionArchive, found: list[Candidate], plan: SearchPlan, *, context: bool = True
) -> list[Hit]:
    """Snippets and one message of context before and after each candidate, in one query."""
    if not found:
        return []
    ids = [c.id for c in found]
    near = (f", p.id, p.role, substr(p.content, 1, {CONTEXT_CHARS + 1}), p.tool_name, "
            f"n.id, n.role, substr(n.content, 1, {CONTEXT_CHARS + 1}), n.tool_name")
    joins = (" LEFT JOIN messages AS p ON p.id = (SELECT x.id FROM messages AS x WHERE "
             "x.session = m.session AND x.id < m.id ORDER BY x.id DESC LIMIT 1)"
             " LEFT JOIN messages AS n ON n.id = (SELECT x.id FROM messages AS x WHERE "
             "x.session = m.session AND x.id > m.id ORDER BY x.id LIMIT 1)")
    rows = archive.db.read(
        "SELECT m.id, s.id, m.role, substr(m.content, 1, 200000), m.tool_name, m.timestamp, "
        "s.title, s.platform, m.tool_calls, length(m.content) > 200000"
        f"{near if context else ''} FROM messages AS m JOIN sessions AS s ON s.num = m.session"
        f"{joins if context else ''} WHERE m.id IN ({','.join('?' * len(ids))})",
        tuple(ids),
    )
    by_id = {r[0]: r for r in rows}
    hits: list[Hit] = []
    for c in found:
        r = by_id.get(c.id)
        if r is None:
            continue
        text = r[3] or ""
        if r[9] and plan.needles and find_match(text, plan.needles) == -1:
            text = full_content(archive, r[0])  # a huge message matched beyond its start
        if plan.needles and find_match(text, plan.needles) == -1 and r[8]:
            text = f"{text} {r[8]}"  # the match is in the tool call
        hits.append(Hit(
            message_id=r[0], session_id=r[1], role=r[2],
            snippet=make_snippet(text, plan.needles), timestamp=r[5], score=c.score,
            tool_name=r[4], session_title=r[6], platform=r[7],
            context_before=_short(r[10:14]) if context and r[10] else None,
            context_after=_short(r[14:18]) if context and r[14] else None,
        ))
    return hits


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
