"""What the archive stores and returns: message encoding and the record types.

Encoding is lossless wherever the input allows it. The two things SQLite cannot hold as text are
repaired and noted instead of refused, because refusing would lose the message: lone UTF-16
surrogates (not Unicode; replaced by U+FFFD and counted in ``meta["_archive_repairs"]``) and
tool-call arguments that are not JSON (kept verbatim as a JSON string, or as ``str(value)`` for
objects JSON cannot express).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from hermes_core.types import Message, Session, ToolCall

__all__ = [
    "ROLES",
    "Candidate",
    "SessionRecord",
    "StoredMessage",
    "best_of",
    "clean_text",
    "decode_tool_calls",
    "encode_message",
    "like_pattern",
    "session_from_spool",
    "spool_record",
    "valid_json",
]

ROLES = ("system", "user", "assistant", "tool")
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> tuple[str, int]:
    """``text`` with lone surrogates replaced by U+FFFD, and how many were replaced."""
    if _SURROGATE.search(text) is None:
        return text, 0
    # A pair that arrived as two code units is joined back into its character first.
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed, len(_SURROGATE.findall(text)) if fixed != text else 0


def _finite(value: Any) -> Any:
    """``value`` with NaN and the infinities as the strings Python spells them with (they are not
    JSON numbers: a column holding them fails the archive's JSON checks, on either backend)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {_finite(k) if isinstance(k, float) else k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"),
                          allow_nan=False)
    except ValueError as exc:  # NaN or an infinity somewhere (else a circular value: raised)
        if "Out of range float" not in str(exc):
            raise
        return json.dumps(_finite(value), ensure_ascii=False, default=str, separators=(",", ":"),
                          allow_nan=False)


def valid_json(text: str | None) -> str | None:
    """A JSON column of a spooled row as the archive stores it: a spool written before NaN and
    the infinities were stored as strings holds them bare, which the JSON checks refuse."""
    if text is None or ("NaN" not in text and "Infinity" not in text):
        return text
    return _json(json.loads(text))


def _call_dict(call: Any) -> dict[str, Any]:
    if isinstance(call, ToolCall):
        return {"id": call.id, "name": call.name, "arguments": call.arguments}
    if isinstance(call, dict):
        return {"id": call.get("id"), "name": call.get("name"),
                "arguments": call.get("arguments", call.get("input", {}))}
    return {"id": None, "name": None, "arguments": str(call)}


def encode_message(message: Message) -> tuple[tuple[Any, ...], int]:
    """The column values (role, content, tool_name, tool_call_id, tool_calls, timestamp, meta) of
    a message, and the number of repairs made; raises ValueError for an unknown role."""
    if message.role not in ROLES:
        raise ValueError(
            f"message role {message.role!r} is not one of {', '.join(ROLES)}; fix the caller"
        )
    repairs = 0
    content = message.content if isinstance(message.content, str) else (
        "" if message.content is None else _json(message.content)
    )
    content, n = clean_text(content)
    repairs += n
    tool_calls = None
    if message.tool_calls:
        tool_calls, n = clean_text(_json([_call_dict(c) for c in message.tool_calls]))
        repairs += n
    tool_name = message.tool_name
    if tool_name is not None:
        tool_name, n = clean_text(str(tool_name))
        repairs += n
    meta_dict = dict(message.meta or {})
    if repairs:
        meta_dict["_archive_repairs"] = repairs
    meta = None
    if meta_dict:
        meta, _ = clean_text(_json(meta_dict))
    timestamp = float(message.timestamp) if message.timestamp is not None else 0.0
    call_id = message.tool_call_id
    if call_id is not None:
        call_id, _ = clean_text(str(call_id))
    return (message.role, content, tool_name, call_id, tool_calls, timestamp, meta), repairs


def decode_tool_calls(raw: str | None) -> list[dict[str, Any]]:
    if not raw:
        return []
    value = json.loads(raw)
    return value if isinstance(value, list) else [value]


@dataclass(slots=True)
class StoredMessage:
    """A message as the archive holds it."""

    id: int
    session_id: str
    role: str
    content: str
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    timestamp: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    COLUMNS = (
        "m.id, s.id, m.role, m.content, m.tool_name, m.tool_call_id, m.tool_calls, "
        "m.timestamp, m.meta"
    )

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> StoredMessage:
        return cls(
            id=row[0], session_id=row[1], role=row[2], content=row[3], tool_name=row[4],
            tool_call_id=row[5], tool_calls=decode_tool_calls(row[6]), timestamp=row[7],
            meta=json.loads(row[8]) if row[8] else {},
        )

    def to_message(self) -> Message:
        calls = []
        for c in self.tool_calls:
            args = c.get("arguments")
            # arguments that were not a JSON object (malformed JSON kept verbatim) stay reachable
            arguments: dict[str, Any] = args if isinstance(args, dict) else (
                {} if args is None else {"_raw": args})
            calls.append(ToolCall(id=str(c.get("id") or ""), name=str(c.get("name") or ""),
                                  arguments=arguments))
        return Message(role=self.role, content=self.content, tool_calls=calls,  # type: ignore[arg-type]
                       tool_call_id=self.tool_call_id, tool_name=self.tool_name,
                       timestamp=self.timestamp, meta=dict(self.meta))

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v not in (None, [], {})}
        out.setdefault("content", self.content)
        return out


@dataclass(slots=True)
class SessionRecord:
    """A session row, with its compaction chain's figures when listed."""

    id: str
    platform: str
    model: str | None
    title: str | None
    started_at: float
    updated_at: float
    ended_at: float | None
    end_reason: str | None
    parent_session_id: str | None
    origin: str | None
    message_count: int
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    api_calls: int = 0
    cost_usd: float = 0.0
    attributes: dict[str, Any] = field(default_factory=dict)
    superseded: bool = False
    #: the first session of its compaction chain, the chain's length and message total
    chain_root: str | None = None
    chain_length: int = 1
    chain_messages: int = 0
    chain_started_at: float | None = None
    #: the start of the chain's first user message
    preview: str | None = None

    COLUMNS = (
        "s.id, s.platform, s.model, s.title, s.started_at, s.updated_at, s.ended_at, "
        "s.end_reason, s.parent_session_id, s.origin, s.message_count, s.input_tokens, "
        "s.output_tokens, s.cache_read_tokens, s.cache_write_tokens, s.api_calls, s.cost_usd, "
        "s.attributes, s.superseded"
    )

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> SessionRecord:
        rec = cls(*row[:17], attributes=json.loads(row[17]) if row[17] else {},  # type: ignore[misc]
                  superseded=bool(row[18]))
        rec.chain_messages = rec.message_count
        rec.chain_started_at = rec.started_at
        return rec

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Candidate:
    """A matching message and its score (lower is better on both backends)."""

    id: int
    score: float
    #: the compaction chain of the message's session (filled by :func:`attach_chains`)
    chain: int = 0


def best_of(found: list[list[Candidate]], limit: int) -> list[Candidate]:
    """The best ``limit`` of several searches' candidates, each message once with its best
    score (ties: newest first)."""
    best: dict[int, Candidate] = {}
    for c in (c for part in found for c in part):
        if c.id not in best or c.score < best[c.id].score:
            best[c.id] = c
    return sorted(best.values(), key=lambda c: (c.score, -c.id))[:limit]


def like_pattern(text: str) -> str:
    """``text`` for a ``LIKE ... ESCAPE '\\'`` pattern: its ``%``, ``_`` and ``\\`` taken
    literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def spool_record(session: Session | str, row: tuple[Any, ...]) -> dict[str, Any]:
    """A message the archive could not store, as a record of its spool: a unique id (noted in
    the ``meta`` table when stored, so a replay interrupted after its commit stores nothing
    twice), what is needed to create the session if the archive never saw it, and the row."""
    if isinstance(session, str):
        fields: dict[str, Any] = {"id": session}
    else:
        fields = {"id": session.id, "platform": session.platform, "model": session.model,
                  "title": session.title, "parent_session_id": session.parent_session_id,
                  "started_at": session.started_at, "attributes": dict(session.attributes or {})}
    import uuid  # spooling is the rare path: not paid by an import of the archive

    entry_id = f"{time.time_ns():x}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    return {"v": 1, "id": entry_id, "session": fields, "row": list(row)}


def session_from_spool(fields: dict[str, Any]) -> Session | str:
    """The session of a spool record (:func:`spool_record`)."""
    if set(fields) == {"id"}:
        return str(fields["id"])
    return Session(
        id=str(fields["id"]), platform=fields.get("platform") or "cli",
        model=fields.get("model"), title=fields.get("title"),
        parent_session_id=fields.get("parent_session_id"),
        started_at=float(fields.get("started_at") or time.time()),
        attributes=dict(fields.get("attributes") or {}),
    )
