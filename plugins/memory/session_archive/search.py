"""Searching the archive: ranked message hits, and the grouped view the session_search tool shows.

Ranking is FTS5's BM25. A query matching a huge number of messages ("error", "file") would make
BM25 score every match (Hermes: ~90 ms at a million messages), so the candidates are the newest
``candidates`` matches (default 500), read in rowid order straight from the index, and BM25 ranks
those. A query with fewer matches than that is ranked exactly; a broader one is ranked among its
most recent matches, which is what someone searching a history usually wants anyway.

Exclusions (the current session's lineage, roles) are applied inside the same SQL statement, so
they never eat into the candidates. CJK queries run on the CJK indexes; 1-2 character runs have
no term statistics (the grams index stores rowids only), so those matches come newest first.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import QueryError
from .query import SearchPlan, build_query, quote
from .store import LINEAGE_CTE, SessionArchive

__all__ = [
    "Candidate",
    "Hit",
    "SearchResult",
    "attach_chains",
    "candidates",
    "full_content",
    "make_snippet",
    "search_messages",
]

DEFAULT_CANDIDATES = 500
CONTEXT_CHARS = 200
SNIPPET_CHARS = 240
#: column weights for BM25: content, tool name, tool-call argument values
_WEIGHTS = "1.0, 0.5, 0.6"


@dataclass(slots=True)
class Candidate:
    id: int
    score: float
    #: the compaction chain of the message's session (filled by :func:`attach_chains`)
    chain: int = 0


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


@dataclass(slots=True)
class SearchResult:
    query: str
    hits: list[Hit] = field(default_factory=list)
    #: "all" (every term), "any" (the OR fallback) or "expression" (operators as written)
    matched: str = "all"
    #: True when the candidates were capped (a broad query ranked among its newest matches)
    capped: bool = False


def _cjk_expr(runs: list[str], op: str) -> str:
    return f" {op} ".join(quote(r) for r in runs)


def candidates(
    archive: SessionArchive,
    plan: SearchPlan,
    *,
    fallback: bool = False,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = DEFAULT_CANDIDATES,
    user: str | None = None,
) -> list[Candidate]:
    """The newest ``limit`` matches of ``plan`` (best first), after exclusions; with ``user``,
    only in that user's sessions."""
    if getattr(archive, "backend", "sqlite") == "postgresql":  # storage.url: pg_search.py
        from .pg_search import pg_candidates

        return pg_candidates(archive, plan, fallback=fallback, roles=roles, limit=limit,
                             exclude_lineage_of=exclude_lineage_of, user=user)
    op = "OR" if fallback else "AND"
    text_expr = plan.fallback if fallback else plan.strict
    longs, shorts = plan.cjk_long, plan.cjk_short
    if fallback and sum(map(bool, (text_expr, longs, shorts))) > 1:
        # OR across kinds of index: run each kind alone and merge.
        parts: list[Candidate] = []
        for sub in (
            SearchPlan(plan.text, strict=text_expr) if text_expr else None,
            SearchPlan(plan.text, cjk=longs) if longs else None,
            SearchPlan(plan.text, cjk=shorts) if shorts else None,
        ):
            if sub is not None:
                parts += candidates(archive, sub, fallback=len(sub.cjk) > 1,
                                    exclude_lineage_of=exclude_lineage_of, roles=roles,
                                    limit=limit, user=user)
        best: dict[int, Candidate] = {}
        for c in parts:
            if c.id not in best or c.score < best[c.id].score:
                best[c.id] = c
        return sorted(best.values(), key=lambda c: (c.score, -c.id))[:limit]
    # The driver is the most selective index that has a term; the others become filters.
    filters: list[tuple[str, str]] = []
    if longs:
        table, expr, score = "messages_cjk", _cjk_expr(longs, op), "bm25(messages_cjk)"
        if shorts:
            filters.append(("messages_cjk_grams", _cjk_expr(shorts, op)))
        if text_expr:
            filters.append(("messages_fts", text_expr))
    elif shorts:
        table, expr, score = "messages_cjk_grams", _cjk_expr(shorts, op), "0.0"
        if text_expr:
            filters.append(("messages_fts", text_expr))
    elif text_expr:
        table, expr, score = "messages_fts", text_expr, f"bm25(messages_fts, {_WEIGHTS})"
    else:
        return []
    where = [f"{table} MATCH :expr"]
    params: dict[str, Any] = {"expr": expr, "limit": limit}
    for i, (ftable, fexpr) in enumerate(filters):
        where.append(
            f"EXISTS (SELECT 1 FROM {ftable} WHERE {ftable} MATCH :f{i} AND rowid = d.rowid)"
        )
        params[f"f{i}"] = fexpr
    prefix = ""
    if exclude_lineage_of:
        # A set of message ids computed once, probed per match: cheaper than joining messages.
        prefix = LINEAGE_CTE
        params["sid"] = exclude_lineage_of
        where.append("d.rowid NOT IN (SELECT id FROM messages WHERE session IN "
                     "(SELECT num FROM lineage))")
    if user is not None:
        where.append("(SELECT coalesce(s.user_id, '') FROM messages AS m JOIN sessions AS s "
                     "ON s.num = m.session WHERE m.id = d.rowid) = :user")
        params["user"] = user
    if roles:
        marks = ", ".join(f":r{i}" for i in range(len(roles)))
        where.append(f"(SELECT role FROM messages WHERE id = d.rowid) IN ({marks})")
        params.update({f"r{i}": r for i, r in enumerate(roles)})
    sql = (
        f"{prefix} SELECT d.rowid, {score} FROM {table} AS d "
        f"WHERE {' AND '.join(where)} ORDER BY d.rowid DESC LIMIT :limit"
    )
    try:
        rows = archive.db.read(sql, params)
    except sqlite3.OperationalError as exc:
        # Every expression is built to be valid; reaching this is a bug, never an empty result.
        raise QueryError(
            f"the search index rejected the query {plan.text[:80]!r} ({exc}); this is a bug in "
            "hermes-core's query builder, please report it with the query"
        ) from exc
    found = [Candidate(r[0], float(r[1])) for r in rows]
    found.sort(key=lambda c: (c.score, -c.id))
    return found


def attach_chains(archive: SessionArchive, found: list[Candidate]) -> None:
    """Fill in each candidate's compaction chain (one query)."""
    for i in range(0, len(found), 900):
        part = found[i : i + 900]
        chains = dict(archive.db.read(
            "SELECT m.id, s.chain FROM messages AS m JOIN sessions AS s ON s.num = m.session "
            f"WHERE m.id IN ({','.join('?' * len(part))})", tuple(c.id for c in part)))
        for c in part:
            c.chain = chains.get(c.id, 0)


def run_plan(
    archive: SessionArchive,
    plan: SearchPlan,
    *,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = DEFAULT_CANDIDATES,
    user: str | None = None,
) -> tuple[list[Candidate], str]:
    """Candidates for the strict query, or for the OR fallback when the strict one finds none."""
    kwargs: dict[str, Any] = {"exclude_lineage_of": exclude_lineage_of, "roles": roles,
                              "limit": limit, "user": user}
    found = candidates(archive, plan, **kwargs)
    if found:
        return found, "expression" if plan.advanced else "all"
    if plan.fallback is not None:
        return candidates(archive, plan, fallback=True, **kwargs), "any"
    return [], "expression" if plan.advanced else "all"


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
    """Snippets and one message of context before and after each candidate, in two queries."""
    if not found:
        return []
    ids = [c.id for c in found]
    marks = ",".join("?" * len(ids))
    rows = archive.db.read(
        "SELECT m.id, s.id, m.role, substr(m.content, 1, 200000), m.tool_name, m.timestamp, "
        "s.title, s.platform, m.tool_calls, length(m.content) > 200000, "
        "(SELECT p.id FROM messages AS p WHERE p.session = m.session AND p.id < m.id "
        " ORDER BY p.id DESC LIMIT 1), "
        "(SELECT n.id FROM messages AS n WHERE n.session = m.session AND n.id > m.id "
        " ORDER BY n.id LIMIT 1) "
        f"FROM messages AS m JOIN sessions AS s ON s.num = m.session WHERE m.id IN ({marks})",
        tuple(ids),
    )
    by_id = {r[0]: r for r in rows}
    near: dict[int, tuple[Any, ...]] = {}
    if context:
        wanted = {x for r in rows for x in (r[10], r[11]) if x is not None}
        if wanted:
            marks = ",".join("?" * len(wanted))
            near = {r[0]: r for r in archive.db.read(
                f"SELECT id, role, substr(content, 1, {CONTEXT_CHARS + 1}), tool_name "
                f"FROM messages WHERE id IN ({marks})", tuple(wanted))}
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
            context_before=_short(near.get(r[10])) if context and r[10] else None,
            context_after=_short(near.get(r[11])) if context and r[11] else None,
        ))
    return hits


def search_messages(
    archive: SessionArchive,
    query: str,
    *,
    limit: int = 20,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    context: bool = True,
    candidate_limit: int = DEFAULT_CANDIDATES,
    user: str | None = None,
) -> SearchResult:
    """The best ``limit`` messages for ``query``; raises :class:`QueryError` for an unusable
    query (never returns an empty result because of punctuation)."""
    plan = build_query(query)
    found, matched = run_plan(archive, plan, exclude_lineage_of=exclude_lineage_of, roles=roles,
                              limit=candidate_limit, user=user)
    return SearchResult(
        query=query, hits=hits_for(archive, found[:limit], plan, context=context),
        matched=matched, capped=len(found) >= candidate_limit,
    )
