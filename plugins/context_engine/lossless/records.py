"""The lossless engine's records and text helpers, shared by both backends and the vector search:
a :class:`Span`, a :class:`StoredMessage`, a :class:`SearchHit`, the searchable words of a query,
a snippet around them, and a message's tool calls as stored."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from hermes_core.types import Message

__all__ = ["SearchHit", "Span", "StoredMessage", "calls_json", "fts_terms", "snippet"]


_WORD = re.compile(r"\w+", re.UNICODE)


def fts_terms(query: str) -> list[str]:
    """The searchable words of ``query``; punctuation never reaches FTS5 as syntax."""
    return [w for w in _WORD.findall(query.lower()) if w][:16]


@dataclass(slots=True)
class Span:
    id: int
    conversation: str
    created_at: float
    first_ts: float | None
    last_ts: float | None
    n_messages: int
    digest: str


@dataclass(slots=True)
class StoredMessage:
    span_id: int
    seq: int
    message: Message


@dataclass(slots=True)
class SearchHit:
    span_id: int
    seq: int
    role: str
    snippet: str
    timestamp: float | None


def calls_json(message: Message) -> str:
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls]
    return json.dumps(calls, ensure_ascii=False, default=str)


def snippet(text: str, terms: list[str], width: int = 240) -> str:
    lowered = text.lower()
    positions = [p for p in (lowered.find(t) for t in terms) if p >= 0]
    centre = min(positions) if positions else 0
    start = max(0, centre - width // 3)
    piece = " ".join(text[start : start + width].split())
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
