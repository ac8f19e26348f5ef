"""The ``session_search`` tool: past sessions, grouped, with a window of each conversation.

* empty query: the most recent conversations (title, when, preview), no LLM;
* otherwise: BM25-ranked hits (see search.py) grouped by conversation (a compaction chain counts
  as one conversation), the current session's whole lineage left out, the best N conversations
  (default 3, at most 5), each with its best hits (snippet plus one message of context either
  side) and a window of the conversation placed to cover the most hits, all windows sharing one
  character budget. The whole result fits ``result_chars`` (16,000 by default, about 4k tokens):
  hits and short windows first; ``session_id`` (with ``around_message_id``) asks for more of one
  conversation, one page of ``result_chars`` at a time. Optionally a summary replaces each window.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.types import ToolContext

from ._excerpts import HIT_CHARS, MESSAGE_CHARS, OVERHEAD, conversation_window, full_content, hits_for
from .errors import QueryError
from .listings import sessions_in_scope
from .query import SearchPlan
from .records import Candidate, clean_text
from .schema import INDEXED_SQL
from .search import DEFAULT_CANDIDATES, attach_chains, plan_query, run_plan
from .store import SessionArchive
from .window import share_budget

#: the system prompt's guidance for a session offering the tool
GUIDANCE = (
    "Use the `session_search` tool when the user refers to an earlier conversation or you need "
    "something that was said before and is not in view."
)

__all__ = ["GUIDANCE", "RESULT_CHARS", "Semantic", "SessionSearchInput", "expand_session",
           "make_tool", "prefetch_text", "session_search"]

HITS_PER_SESSION = 5
#: the default size of one call's whole result, in characters of JSON
RESULT_CHARS = 16_000

DESCRIPTION = (
    "Search your past conversations with the user (not the current one). Give a few distinctive "
    "words, a \"quoted phrase\", or a plain question; CJK text works too. Returns the best "
    "matching sessions with excerpts around the matches. An empty query lists recent sessions. "
    "For more of one conversation, call again with its session_id (and around_message_id to "
    "move the window). Use it when the user refers to something discussed before, or to recall "
    "earlier decisions, commands or facts."
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
    session_id: str | None = Field(
        default=None, max_length=200,
        description="Show more of this session (a session_id from an earlier result): a longer "
                    "window around the query's matches in it, or around around_message_id.",
    )
    around_message_id: int | None = Field(
        default=None, ge=1,
        description="With session_id: centre the window on this message id (page with the "
                    "ids in earlier_message_id / later_message_id).",
    )


def _when(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _recent(archive: SessionArchive, current: str | None, limit: int,
            user: str | None = None) -> dict[str, Any]:
    records = archive.list_sessions(limit=limit, exclude_lineage_of=current, user=user)
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


def _title_chains(archive: SessionArchive, query: str, current: str | None,
                  user: str | None = None) -> list[int]:
    """Chains with a session titled exactly ``query`` (quotes stripped, case-insensitive).

    One rule for every form of a title: "Deploy notes" and "deploy notes #2" each match the
    session carrying that title, and both lead to the same chain (Hermes preferred any "#N"
    variant by recency and compared case-sensitively only on exact titles).
    """
    title = query.strip().strip("\"'`").strip()
    if not title:
        return []
    where = [archive.db.nocase_equals("s.title", ":title")]
    params: dict[str, Any] = {"title": title}
    prefix = sessions_in_scope(where, params, current, user)
    rows = archive.db.read(
        f"{prefix} SELECT s.chain FROM sessions AS s WHERE {' AND '.join(where)} "
        "GROUP BY s.chain ORDER BY max(s.updated_at) DESC LIMIT 5", params)
    return [r[0] for r in rows]


_MATCHED = {
    "all": "all words", "any": "any word (no message had all)",
    "words": "all words, split at punctuation (no message had them as written)",
    "expression": "the expression as written",
    "meaning": "by meaning only (no message had the words)",
    "none": "by meaning only (the query has no words to search for)",
}


@dataclass
class Semantic:
    """What semantic search has to work with: the guarded embedder and the vector index (both
    None when it is off), and, when it is off or degraded, why."""

    embedder: Any = None
    index: Any = None
    problem: str | None = None


def _sizes(result_chars: int) -> tuple[int, int, int]:
    """(hit message cap, other message cap, hits per session) for a result budget."""
    hit = min(HIT_CHARS, max(400, result_chars // 12))
    other = min(MESSAGE_CHARS, max(150, result_chars // 40))
    return hit, other, HITS_PER_SESSION if result_chars >= 50_000 else 3


def _size(out: dict[str, Any]) -> int:
    return len(json.dumps(out, ensure_ascii=False))


def _skeleton(archive: SessionArchive, chain: int) -> list[tuple[int, str, int]]:
    return [(r[0], r[1], r[2]) for r in archive.db.read(
        "SELECT m.id, m.role, length(m.content) + coalesce(length(m.tool_calls), 0) "
        "FROM sessions AS s JOIN messages AS m ON m.session = s.num WHERE s.chain = ? "
        f"AND {INDEXED_SQL} ORDER BY m.id", (chain,))]


def _fit_windows(
    out: dict[str, Any], make: Callable[[list[int]], list[dict[str, Any]]], budgets: list[int],
    result_chars: int,
) -> None:
    """Fill ``out["results"][i]["window"]`` from ``make(budgets)``, shrinking the budgets until
    the whole result fits ``result_chars`` (a window keeps at least its best hit)."""
    for _ in range(6):
        windows = make(budgets)
        for result, window in zip(out["results"], windows, strict=True):
            result["window"] = window
        excess = _size(out) - result_chars
        if excess <= 0:
            return
        if not any(budgets):
            break
        total = sum(budgets) or 1
        budgets = [max(0, b - math.ceil(excess * 1.1 * b / total) - 200) for b in budgets]
    # still too big (huge hits, a small budget): the hits stay; windows shrink to their best
    # hit, then go, the last session's first
    for result in out["results"]:
        window = result["window"]
        window["messages"] = [m for m in window["messages"] if m.get("match")][:1]
        window["trimmed"] = True
    for result in reversed(out["results"]):
        if _size(out) <= result_chars:
            break
        result["window"]["messages"] = []


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
    result_chars: int = RESULT_CHARS,
    session_id: str | None = None,
    around_message_id: int | None = None,
    semantic: Semantic | None = None,
    user: str | None = None,
    per_user: bool = False,
    facts: Callable[[str, str | None, str | None], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The tool's result as plain data; raises QueryError for an unusable query.

    The result (as JSON) fits ``result_chars``; ``window_chars`` caps the conversation windows
    inside it. With ``session_id``: more of that one session (see :func:`expand_session`). With
    ``user`` (memory.scope: user) only that user's sessions are listed, searched (by words and
    meaning) and expanded. ``per_user`` is the provider's setting; the tool's handler turns it
    into ``user`` from the session.
    """
    query = clean_text(query)[0]  # a lone surrogate cannot reach SQLite
    if session_id is not None and user is not None:
        _check_owner(archive, session_id, user)
    if session_id is not None:
        return expand_session(archive, session_id, query, around_message_id=around_message_id,
                              result_chars=result_chars, current_session_id=current_session_id)
    if not query.strip():
        return _recent(archive, current_session_id, limit or 5, user)
    ranked = _matches(archive, query, semantic, current_session_id, roles, candidates, user)
    out: dict[str, Any] = {"mode": "search", "query": query,
                           "matched": _MATCHED[ranked.matched]}
    if semantic is not None:
        out["semantic"] = ranked.problem or "on"
    derived = facts(query, user, current_session_id) if facts is not None else []
    if derived:  # derived memory (fact_search.py): each names its source session
        out["facts"] = derived
    titled = _title_chains(archive, query, current_session_id, user)
    if not ranked.found and not titled:
        return _no_match(out, bool(derived))
    attach_chains(archive, ranked.found)
    groups: dict[int, list[Candidate]] = {ch: [] for ch in titled}  # a title match comes first
    for c in ranked.found:  # best first, so each group is ordered best first too
        groups.setdefault(c.chain, []).append(c)
    chosen, heads = _choose(archive, list(groups), titled, set(demote_platforms),
                            limit or limit_default)
    # what the envelope takes (and the notes added below) is not available to the results
    reserve = _size(out) + 160 + (120 if summarise else 0)
    out.update(_present(archive, chosen, groups, heads, titled, ranked.plan, window_chars,
                        result_chars - reserve, sessions_matched=len(groups), via=ranked.via,
                        newer=ranked.newer))
    if summarise is not None:
        note = summarise(out["results"], query)
        if note:
            out["summary_note"] = note
    return out


def _check_owner(archive: SessionArchive, session_id: str, user: str) -> None:
    """Refuse a ``session_id`` that is not one of ``user``'s sessions (or does not exist)."""
    try:
        owner = archive.get_session(session_id).attributes.get("user_id") or ""
    except Exception:
        owner = None
    if owner != user:
        raise QueryError(f"there is no session {session_id!r} among this user's sessions")


@dataclass
class _Ranked:
    """The ranked messages of a search, which try matched, the plan, and with semantic search
    which path found each, what it lacked, and the conversations later ones seem to update."""

    found: list[Candidate]
    matched: str
    plan: SearchPlan
    via: dict[int, str] = field(default_factory=dict)
    problem: str | None = None
    newer: dict[int, tuple[int, int]] = field(default_factory=dict)


def _matches(archive: SessionArchive, query: str, semantic: Semantic | None, current: str | None,
             roles: tuple[str, ...] | None, candidates: int, user: str | None) -> _Ranked:
    """The messages matching ``query``: by words and meaning when semantic search is on, else
    by words."""
    if semantic is not None and semantic.embedder is not None:
        from .hybrid import hybrid_candidates  # numpy: only when semantic search is on

        fused = hybrid_candidates(archive, query, semantic.embedder, semantic.index,
                                  exclude_lineage_of=current, roles=roles,
                                  limit=candidates, user=user)
        return _Ranked(fused.found, fused.matched, fused.plan, fused.via, fused.problem,
                       fused.newer)
    plan = plan_query(archive, query)
    found, matched = run_plan(archive, plan, exclude_lineage_of=current,
                              roles=roles, limit=candidates, user=user)
    return _Ranked(found, matched, plan, problem=semantic.problem if semantic is not None else None)


def _no_match(out: dict[str, Any], derived: bool) -> dict[str, Any]:
    """``out`` saying that no earlier session matches (and, with ``derived`` facts, where to
    read them)."""
    out.update(results=[], count=0, note="No earlier session matches. Try other words, or an "
               "empty query to list recent sessions.")
    if derived:
        out["note"] = ("No earlier message matches; the facts were derived from earlier "
                       "sessions: call again with a fact's session_id to read it.")
    return out


#: conversations whose newest record is read at a time while choosing the results
_HEADS_BATCH = 64


def _choose(archive: SessionArchive, chains: list[int], titled: list[int], demoted: set[str],
            n: int) -> tuple[list[int], dict[int, tuple[Any, ...]]]:
    """The first ``n`` of ``chains`` (best first) with the conversations of ``demoted``
    platforms moved after all others (unless asked for by title), and the records read for it.

    The records are read a batch at a time, as far down the ranking as the choice needs (a
    common word matches hundreds of conversations, of which three are shown): the result is
    the same as sorting them all."""
    heads: dict[int, tuple[Any, ...]] = {}
    kept: list[int] = []
    later: list[int] = []
    for start in range(0, len(chains), _HEADS_BATCH):
        batch = chains[start: start + _HEADS_BATCH]
        heads.update(_heads(archive, batch))
        for ch in batch:
            platform = heads.get(ch, (0, 0, 0, ""))[3]
            (later if ch not in titled and platform in demoted else kept).append(ch)
        if len(kept) >= n:
            break
    return (kept + later)[:n], heads


def _heads(archive: SessionArchive, chains: list[int]) -> dict[int, tuple[Any, ...]]:
    return {r[0]: r for r in archive.read_in(
        "SELECT c.chain, c.id, c.title, c.platform, c.model, c.updated_at, "
        "(SELECT min(started_at) FROM sessions WHERE chain = c.chain) "
        "FROM sessions AS c WHERE c.chain IN ({marks}) AND c.superseded = 0 ORDER BY c.num",
        chains)}


def _newer(archive: SessionArchive, chain: int, message_id: int) -> dict[str, Any]:
    head = _heads(archive, [chain]).get(chain)
    text = full_content(archive, message_id)
    return {"session_id": head[1] if head else None, "started_at": _when(head[6]) if head else None,
            "message_id": message_id, "snippet": text[:240] + ("…" if len(text) > 240 else ""),
            "note": "a later conversation on the same topic that may update this one"}


def _present(
    archive: SessionArchive, chosen: list[int], groups: dict[int, list[Candidate]],
    heads: dict[int, tuple[Any, ...]], titled: list[int], plan: SearchPlan, window_chars: int,
    result_chars: int, *, sessions_matched: int, via: dict[int, str] | None = None,
    newer: dict[int, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """The results part of a search: per session its hits, then windows sharing what is left
    of ``result_chars``; a session that a later one seems to update names it (``newer``: its
    session, date and best message), beside it, not instead of it."""
    hit_chars, message_chars, hits_per = _sizes(result_chars)
    context = result_chars >= 50_000  # a small result shows neighbours in the window instead
    skeletons = {ch: _skeleton(archive, ch) for ch in chosen}
    results = []
    for ch in chosen:
        hits = hits_for(archive, groups[ch][:hits_per], plan, context=context)
        result = _session_result(heads.get(ch), hits, len(groups[ch]), ch in titled, via)
        if newer and ch in newer:
            result["newer"] = _newer(archive, *newer[ch])
        results.append(result)
    out: dict[str, Any] = {"results": results, "count": len(results),
                           "sessions_matched": sessions_matched}
    more = ("Each window shows part of its conversation; call session_search again with "
            "session_id (and around_message_id) to see more of one.")
    result_chars -= len(more) + 12
    empty = {"messages_before": 0, "messages_after": 0, "messages": []}
    for r in results:
        r["window"] = empty
    _shorten_hits(out, result_chars)
    room = max(0, min(window_chars, result_chars - _size(out) - 400 * len(chosen)))
    needs = []
    for ch in chosen:
        hit_ids = {c.id for c in groups[ch]}
        needs.append(sum(min(n, hit_chars if mid in hit_ids else message_chars) + OVERHEAD
                         for mid, _r, n in skeletons[ch]))

    def make(budgets: list[int]) -> list[dict[str, Any]]:
        return [conversation_window(archive, [c.id for c in groups[ch]], plan, b, skeletons[ch], hit_chars,
                        message_chars) for ch, b in zip(chosen, budgets, strict=True)]

    _fit_windows(out, make, share_budget(needs, room), result_chars)
    if any(r["window"]["messages_before"] or r["window"]["messages_after"] for r in results):
        out["more"] = more
    return out


def _session_result(head: tuple[Any, ...] | None, hits: list[Any], matches: int, titled: bool,
                    via: dict[int, str] | None) -> dict[str, Any]:
    """One session of the results: what it is (``head``: its newest record), how many of its
    messages matched, and its ``hits`` (with the path that found each, when ``via`` says)."""
    result: dict[str, Any] = {
        "session_id": head[1] if head else (hits[0].session_id if hits else None),
        "title": head[2] if head else None,
        "platform": head[3] if head else None,
        "model": head[4] if head else None,
        "started_at": _when(head[6]) if head else None,
        "last_active": _when(head[5]) if head else None,
        "matches": matches,
        **({"title_match": True} if titled else {}),
        "hits": [h.to_dict() | {"timestamp": _when(h.timestamp)} for h in hits],
    }
    for h in result["hits"]:
        if via:
            h["found_by"] = via.get(h["message_id"], "words")
        h.pop("score", None)
        h.pop("session_title", None)
        h.pop("platform", None)
    if result["model"] is None:
        result.pop("model")
    return result


def _shorten_hits(out: dict[str, Any], result_chars: int) -> None:
    """Hits come first: when they alone take over half the budget, keep fewer and shorter ones."""
    for keep, snippet in ((2, 240), (1, 240), (1, 120)):
        if _size(out) <= result_chars // 2:
            break
        for r in out["results"]:
            r["hits"] = r["hits"][:keep]
            for h in r["hits"]:
                h.pop("context_before", None)
                h.pop("context_after", None)
                if len(h["snippet"]) > snippet:
                    h["snippet"] = h["snippet"][:snippet] + "…"


def expand_session(
    archive: SessionArchive, session_id: str, query: str = "", *,
    around_message_id: int | None = None, result_chars: int = RESULT_CHARS,
    current_session_id: str | None = None,
) -> dict[str, Any]:
    """One page (``result_chars``) of one session's conversation: around ``around_message_id``,
    else around the query's matches in it, else from its start."""
    sid = clean_text(session_id)[0]
    rows = archive.db.read("SELECT chain FROM sessions WHERE id = ?", (sid,))
    if not rows:
        raise QueryError(f"no session {sid!r}; use a session_id from a search result")
    chain = rows[0][0]
    skeleton = _skeleton(archive, chain)
    plan = plan_query(archive, query) if query.strip() else SearchPlan(text="")
    if around_message_id is not None:
        anchors = [around_message_id] if any(m == around_message_id for m, _r, _n in skeleton) \
            else []
        if not anchors:
            raise QueryError(f"message {around_message_id} is not in session {sid!r}")
    elif plan.strict or plan.cjk:
        found, _ = run_plan(archive, plan)
        attach_chains(archive, found)
        anchors = [c.id for c in found if c.chain == chain]
    else:
        anchors = [skeleton[0][0]] if skeleton else []
    head = _heads(archive, [chain]).get(chain)
    out: dict[str, Any] = {"mode": "session", "session_id": head[1] if head else sid,
                           "title": head[2] if head else None,
                           "started_at": _when(head[6]) if head else None}
    hit_chars, message_chars = min(HIT_CHARS, result_chars // 3), min(MESSAGE_CHARS * 2,
                                                                        result_chars // 6)
    out["results"] = [{}]

    def make(budgets: list[int]) -> list[dict[str, Any]]:
        return [conversation_window(archive, anchors, plan, budgets[0], skeleton, hit_chars, message_chars)]

    _fit_windows(out, make, [max(0, result_chars - 600)], result_chars)
    out["window"] = out.pop("results")[0]["window"]
    return out


def prefetch_text(archive: SessionArchive, query: str, current_session_id: str | None,
                  options: dict[str, Any], *, sessions: int = 2, chars: int = 1500) -> str | None:
    """The archive's ``prefetch``: the best hits of the best ``sessions`` conversations for
    ``query`` as a few lines of text (at most ``chars``), or None when nothing matches or the
    query cannot be searched."""
    opts = {k: v for k, v in options.items()
            if k in ("candidates", "demote_platforms", "semantic", "user")}
    try:
        found = session_search(archive, query, current_session_id=current_session_id,
                               limit=sessions, result_chars=max(4000, 3 * chars), **opts)
    except QueryError:
        return None
    lines: list[str] = []
    for result in found.get("results", []):
        title = f' "{result["title"]}"' if result.get("title") else ""
        hits = " | ".join(f'{h["role"]}: {h["snippet"]}' for h in result.get("hits", [])[:2])
        if hits:
            lines.append(f'- {result.get("started_at") or ""}{title} (session '
                         f'{result["session_id"]}): {hits}')
    if not lines:
        return None
    head = ("Earlier conversations that may be relevant (session_archive; call session_search "
            "with a session_id for more):")
    text = head
    for line in lines:
        if len(text) + 1 + len(line) > chars:
            room = chars - len(text) - 2
            if room > 80:
                text += "\n" + line[:room] + "…"
            break
        text += "\n" + line
    return text if text != head else None


def make_tool(
    archive: Callable[[], SessionArchive],
    settings: Callable[[], dict[str, Any]],
) -> Tool:
    """The Tool object; ``archive`` and ``settings`` are read at call time."""

    def handler(args: SessionSearchInput, context: ToolContext) -> dict[str, Any]:
        current = context.session.id if context.session is not None else None
        options = settings()
        # memory.scope: user: a user's search never reaches another user's sessions; a session
        # without a user key sees the sessions without one
        user = None
        if options.pop("per_user", False):
            user = (context.session.user_id if context.session is not None else None) or ""
        try:
            return session_search(
                archive(), args.query, current_session_id=current, limit=args.limit,
                roles=tuple(args.roles) if args.roles else None, session_id=args.session_id,
                around_message_id=args.around_message_id, user=user, **options,
            )
        except QueryError as exc:
            raise ToolError(str(exc)) from None

    return Tool(name="session_search", description=DESCRIPTION, handler=handler,
                input_model=SessionSearchInput, parallel_safe=True, guidance=GUIDANCE)
