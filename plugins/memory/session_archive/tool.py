"""The ``session_search`` tool: past sessions, grouped, with a window of each conversation.

* empty query: the most recent conversations (title, when, preview), no LLM;
* otherwise: BM25-ranked hits (see search.py) grouped by conversation (a compaction chain counts
  as one conversation), the current session's whole lineage left out, the best N conversations
  (default 3, at most 5), each with its best hits (snippet plus one message of context either
  side) and a window of the conversation placed to cover the most hits, all windows sharing one
  character budget (``window_chars``, 100K by default). Optionally a summary replaces each window.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.types import ToolContext

from .errors import QueryError
from .query import SearchPlan
from .records import clean_text
from .schema import INDEXED_SQL
from .search import (
    DEFAULT_CANDIDATES,
    Candidate,
    attach_chains,
    find_match,
    full_content,
    hits_for,
    plan_query,
    run_plan,
)
from .store import LINEAGE_CTE, SessionArchive
from .window import place_window, share_budget

__all__ = ["SessionSearchInput", "make_tool", "session_search"]

#: a window shows at most this much of a matching message (around the match) ...
HIT_CHARS = 6000
#: ... and of any other message (its start)
MESSAGE_CHARS = 1500
#: tool-call arguments shown per call
ARGS_CHARS = 600
#: JSON keys and punctuation per message, counted against the budget
OVERHEAD = 40
HITS_PER_SESSION = 5

DESCRIPTION = (
    "Search your past conversations with the user (not the current one). Give a few distinctive "
    "words, a \"quoted phrase\", or a plain question; CJK text works too. Returns the best "
    "matching sessions with excerpts around the matches. An empty query lists recent sessions. "
    "Use it when the user refers to something discussed before, or to recall earlier decisions, "
    "commands or facts."
)


class SessionSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        default="",
        description="Words or a question to look for; empty lists the most recent sessions.",
    )
    limit: int | None = Field(
        default=None, ge=1, le=5,
        description="How many sessions to return (default 3 for a search, 5 for recent).",
    )
    roles: list[Literal["user", "assistant", "tool", "system"]] | None = Field(
        default=None, description="Only match messages of these roles (default: all).",
    )


def _when(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cap(text: str, limit: int, around: int = -1) -> str:
    if len(text) <= limit:
        return text
    if around < 0:
        return text[:limit] + f" …[{len(text) - limit:,} more characters]"
    start = max(0, min(around - limit // 3, len(text) - limit))
    end = start + limit
    return (f"[{start:,} characters before] …" if start else "") + text[start:end] + (
        f"… [{len(text) - end:,} more characters]" if end < len(text) else "")


def _calls(raw: str | None) -> list[dict[str, Any]] | None:
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
        out.append({"name": c.get("name"), "arguments": _cap(text, ARGS_CHARS)})
    return out


def _recent(archive: SessionArchive, current: str | None, limit: int) -> dict[str, Any]:
    records = archive.list_sessions(limit=limit, exclude_lineage_of=current)
    sessions = [
        {
            "session_id": r.id, "title": r.title, "platform": r.platform,
            "started_at": _when(r.chain_started_at), "last_active": _when(r.updated_at),
            "messages": r.chain_messages, "preview": (r.preview or "")[:120] or None,
            **({"compactions": r.chain_length - 1} if r.chain_length > 1 else {}),
        }
        for r in records
    ]
    return {"mode": "recent", "sessions": sessions, "count": len(sessions),
            "note": f"The {len(sessions)} most recent sessions (the current one excluded). "
                    "Search with a query to see their content."}


def _title_chains(archive: SessionArchive, query: str, current: str | None) -> list[int]:
    """Chains with a session titled exactly ``query`` (quotes stripped, case-insensitive).

    One rule for every form of a title: "Deploy notes" and "deploy notes #2" each match the
    session carrying that title, and both lead to the same chain (Hermes preferred any "#N"
    variant by recency and compared case-sensitively only on exact titles).
    """
    title = query.strip().strip("\"'`").strip()
    if not title:
        return []
    prefix, exclude = "", ""
    params: dict[str, Any] = {"title": title}
    if current:
        prefix, exclude = LINEAGE_CTE, "AND num NOT IN (SELECT num FROM lineage)"
        params["sid"] = current
    rows = archive.db.read(
        f"{prefix} SELECT DISTINCT chain FROM sessions WHERE title = :title COLLATE NOCASE "
        f"{exclude} ORDER BY updated_at DESC LIMIT 5", params)
    return [r[0] for r in rows]


def _window(
    archive: SessionArchive, hit_ids: list[int], plan: SearchPlan, budget: int,
    skeleton: list[tuple[int, str, int]],
) -> dict[str, Any]:
    pos = {mid: i for i, (mid, _r, _n) in enumerate(skeleton)}
    hit_set = set(hit_ids)
    lengths = [min(n, HIT_CHARS if mid in hit_set else MESSAGE_CHARS) + OVERHEAD
               for mid, _role, n in skeleton]
    start, end = place_window(lengths, [pos[h] for h in hit_ids if h in pos], budget)
    ids = [mid for mid, _r, _n in skeleton[start:end]]
    rows: dict[int, tuple[Any, ...]] = {}
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        rows.update({r[0]: r for r in archive.db.read(
            "SELECT id, role, substr(content, 1, 400000), tool_name, tool_calls, "
            "length(content) > 400000 "
            f"FROM messages WHERE id IN ({','.join('?' * len(part))})", tuple(part))})
    messages = []
    for mid in ids:
        r = rows[mid]
        content = r[2] or ""
        is_hit = mid in hit_set
        around = find_match(content, plan.needles) if is_hit else -1
        if is_hit and around == -1 and r[5]:
            content = full_content(archive, mid)  # a huge message matched beyond its start
            around = find_match(content, plan.needles)
        item: dict[str, Any] = {"id": mid, "role": r[1],
                                "content": _cap(content, HIT_CHARS if is_hit else MESSAGE_CHARS,
                                                around)}
        if r[3]:
            item["tool_name"] = r[3]
        calls = _calls(r[4])
        if calls:
            item["tool_calls"] = calls
        if is_hit:
            item["match"] = True
        messages.append(item)
    return {"messages_before": start, "messages_after": len(skeleton) - end,
            "messages": messages}


def session_search(
    archive: SessionArchive,
    query: str,
    *,
    current_session_id: str | None = None,
    limit: int | None = None,
    roles: tuple[str, ...] | None = None,
    window_chars: int = 100_000,
    candidates: int = DEFAULT_CANDIDATES,
    demote_platforms: tuple[str, ...] = ("cron",),
    summarise: Callable[[list[dict[str, Any]], str], str | None] | None = None,
    limit_default: int = 3,
) -> dict[str, Any]:
    """The tool's result as plain data; raises QueryError for an unusable query."""
    if not query.strip():
        return _recent(archive, current_session_id, limit or 5)
    query = clean_text(query)[0]  # a lone surrogate cannot reach SQLite
    plan = plan_query(archive, query)
    broad: list[bool] = []
    found, matched = run_plan(archive, plan, exclude_lineage_of=current_session_id, roles=roles,
                              limit=candidates, broad=broad)
    out: dict[str, Any] = {"mode": "search", "query": query,
                           "matched": {"all": "all words", "any": "any word (no message had all)",
                                       "words": "all words, split at punctuation (no message had "
                                                "them as written)",
                                       "expression": "the expression as written"}[matched]}
    titled = _title_chains(archive, query, current_session_id)
    if not found and not titled:
        out.update(results=[], count=0, note="No earlier session matches. Try other words, or an "
                   "empty query to list recent sessions.")
        return out
    attach_chains(archive, found)
    groups: dict[int, list[Candidate]] = {ch: [] for ch in titled}  # a title match comes first
    for c in found:  # best first, so each group is ordered best first too
        groups.setdefault(c.chain, []).append(c)
    chains = list(groups)
    heads = {r[0]: r for r in archive.db.read(
        "SELECT c.chain, c.id, c.title, c.platform, c.model, c.updated_at, "
        "(SELECT min(started_at) FROM sessions WHERE chain = c.chain) "
        f"FROM sessions AS c WHERE c.chain IN ({','.join('?' * len(chains))}) "
        "AND c.superseded = 0 ORDER BY c.num", tuple(chains))}
    demoted = set(demote_platforms)
    # stable: best first, demoted platforms last (unless asked for by title)
    chains.sort(key=lambda ch: ch not in titled and heads.get(ch, (0, 0, 0, ""))[3] in demoted)
    chosen = chains[: limit or limit_default]
    skeletons = {}
    for ch in chosen:
        skeletons[ch] = [(r[0], r[1], r[2]) for r in archive.db.read(
            "SELECT m.id, m.role, length(m.content) + coalesce(length(m.tool_calls), 0) "
            "FROM sessions AS s JOIN messages AS m ON m.session = s.num WHERE s.chain = ? "
            f"AND {INDEXED_SQL} ORDER BY m.id", (ch,))]
    needs = []
    for ch in chosen:
        hit_ids = {c.id for c in groups[ch]}
        needs.append(sum(min(n, HIT_CHARS if mid in hit_ids else MESSAGE_CHARS) + OVERHEAD
                         for mid, _r, n in skeletons[ch]))
    budgets = share_budget(needs, window_chars)
    results = []
    for ch, budget in zip(chosen, budgets, strict=True):
        group = groups[ch]
        head = heads.get(ch)
        hits = hits_for(archive, group[:HITS_PER_SESSION], plan)
        result: dict[str, Any] = {
            "session_id": head[1] if head else (hits[0].session_id if hits else None),
            "title": head[2] if head else None,
            "platform": head[3] if head else None,
            "model": head[4] if head else None,
            "started_at": _when(head[6]) if head else None,
            "last_active": _when(head[5]) if head else None,
            "matches": len(group),
            **({"title_match": True} if ch in titled else {}),
            "hits": [h.to_dict() | {"timestamp": _when(h.timestamp)} for h in hits],
            "window": _window(archive, [c.id for c in group], plan, budget, skeletons[ch]),
        }
        for h in result["hits"]:
            h.pop("score", None)
            h.pop("session_title", None)
            h.pop("platform", None)
        results.append(result)
    out.update(results=results, count=len(results), sessions_matched=len(groups))
    if broad:
        out["note"] = (f"More than {candidates:,} messages match; ranked within a sample spread "
                       "over the whole history. Add words to narrow the search.")
    if summarise is not None:
        note = summarise(results, query)
        if note:
            out["summary_note"] = note
    return out


def make_tool(
    archive: Callable[[], SessionArchive],
    settings: Callable[[], dict[str, Any]],
) -> Tool:
    """The Tool object; ``archive`` and ``settings`` are read at call time."""

    def handler(args: SessionSearchInput, context: ToolContext) -> dict[str, Any]:
        current = context.session.id if context.session is not None else None
        try:
            return session_search(
                archive(), args.query, current_session_id=current, limit=args.limit,
                roles=tuple(args.roles) if args.roles else None, **settings(),
            )
        except QueryError as exc:
            raise ToolError(str(exc)) from None

    return Tool(name="session_search", description=DESCRIPTION, handler=handler,
                input_model=SessionSearchInput, parallel_safe=True)
