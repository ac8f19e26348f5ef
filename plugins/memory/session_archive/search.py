"""Searching the archive: ranked message hits, and the grouped view the session_search tool shows.

Ranking is FTS5's BM25, computed for every match when a query has at most ``candidates``
matches (default 2,000; a few microseconds per match). Counting the matches first is
cheap (no scoring), so the exact path is chosen only when it is affordable:

* a query with at most ``candidates`` matches is ranked exactly, over the whole history;
* the any-word fallback ranks the union of its *distinctive* words (those matching at most
  ``candidates`` messages each) exactly; words more common than that add nothing to BM25 worth
  the cost (their inverse document frequency is low) and drive the ranking only when every word
  is that common;
* a query broader than that is ranked within a sample spread over the whole history (the newest
  :data:`PER_SLICE` matches of each of :data:`SLICES` equal slices of message ids), never the newest matches
  alone, so an old conversation is not lost because the archive grew.

Exclusions (the current session's lineage, roles, ``-word`` exclusions, and the search tools'
own echoes) are applied inside the same SQL statement, so they never eat into the candidates.
A search tool's result is a copy of earlier messages, and the call that asked for it holds the
query's own words: both would outrank the conversation they echo, so they are not searched.
CJK queries run on the CJK indexes; 1-2 character runs have no term statistics (the grams index
stores rowids only), so those matches come newest first.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .echoes import check_echoes
from .errors import QueryError
from .query import MIN_PREFIX, SearchPlan, build_query, quote, word_for_stem
from .records import Candidate, clean_text
from .store import LINEAGE_CTE, SessionArchive

__all__ = [
    "Candidate",
    "Hit",
    "SearchResult",
    "attach_chains",
    "candidates",
    "full_content",
    "make_snippet",
    "plan_query",
    "search_messages",
]

DEFAULT_CANDIDATES = 2000
#: slices of the id range a too-broad query is sampled from, and matches ranked per slice
SLICES = 8
PER_SLICE = 64
CONTEXT_CHARS = 200
SNIPPET_CHARS = 240
#: column weights for BM25: content, tool name, tool-call argument values
_WEIGHTS = "1.0, 0.5, 0.6"
#: a prefix is also matched by indexed stems up to this many characters shorter
_STEM_SLACK = 4


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
    #: "all" (every term), "words" (every word, glued words split), "any" (the OR fallback) or
    #: "expression" (operators as written)
    matched: str = "all"
    #: True when the query was too broad to rank every match (ranked within a sample spread
    #: over the whole history)
    capped: bool = False


def _cjk_expr(runs: list[str], op: str) -> str:
    return f" {op} ".join(quote(r) for r in runs)


def stem_expander(archive: SessionArchive) -> Callable[[str], list[str]]:
    """For a prefix like ``deploym``: words that match the indexed stems it extends.

    The index stores Porter stems, so ``deployment`` is stored as ``deploy`` and the prefix
    ``deploym*`` matches nothing. The stems a prefix extends by a few letters are what its
    words were stored as; each is matched through a word the stemmer reduces to exactly that
    stem (the stemmer is not idempotent: the query word ``deploy`` itself becomes ``deploi``),
    and kept when the index has it (one lookup each).
    """

    def expand(prefix: str) -> list[str]:
        out: list[str] = []
        shortest = max(MIN_PREFIX, len(prefix) - _STEM_SLACK)
        for k in range(len(prefix), shortest - 1, -1):
            stem = prefix[:k]
            if not stem.isalnum():
                continue
            word = word_for_stem(stem)
            if word is None or (k == len(prefix) and word == stem):
                continue  # the prefix query itself covers it
            if archive.backend == "postgresql":
                from .pg_search import indexes_word

                found = indexes_word(archive, quote(word))
            else:
                found = bool(archive.db.read(
                    "SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT 1",
                    (quote(word),)))
            if found:
                out.append(word)
        return out

    return expand


def plan_query(archive: SessionArchive, query: str) -> SearchPlan:
    """:func:`build_query` with prefix expansion against this archive's index."""
    return build_query(query, stem_expander(archive))


class _Scope:
    """The WHERE clauses every try of one search shares (on the driving table ``d``)."""

    def __init__(self, plan: SearchPlan, exclude_lineage_of: str | None,
                 roles: tuple[str, ...] | None, user: str | None = None) -> None:
        self.prefix = ""
        self.where: list[str] = []
        self.params: dict[str, Any] = {}
        self.lineage, self.roles, self.user = exclude_lineage_of, roles, user
        if user is not None:  # memory.scope: user: only that user's sessions
            self.where.append("(SELECT coalesce(s.user_id, '') FROM messages AS m JOIN sessions AS s "
                              "ON s.num = m.session WHERE m.id = d.rowid) = :user")
            self.params["user"] = user
        if exclude_lineage_of:
            # A set of message ids computed once, probed per match: cheaper than joining messages.
            self.prefix = LINEAGE_CTE
            self.params["sid"] = clean_text(exclude_lineage_of)[0]
            self.where.append("d.rowid NOT IN (SELECT id FROM messages WHERE session IN "
                              "(SELECT num FROM lineage))")
        if roles:
            marks = ", ".join(f":r{i}" for i in range(len(roles)))
            self.where.append(f"(SELECT role FROM messages WHERE id = d.rowid) IN ({marks})")
            self.params.update({f"r{i}": r for i, r in enumerate(roles)})
        if plan.exclude:
            self.where.append("d.rowid NOT IN (SELECT rowid FROM messages_fts "
                              "WHERE messages_fts MATCH :exclude)")
            self.params["exclude"] = plan.exclude



def _read(archive: SessionArchive, plan: SearchPlan, sql: str, params: dict[str, Any]
          ) -> list[Any]:
    try:
        return archive.db.read(sql, params)
    except sqlite3.OperationalError as exc:
        # Every expression is built to be valid; reaching this is a bug, never an empty result.
        raise QueryError(
            f"the search index rejected the query {plan.text[:80]!r} ({exc}); this is a bug in "
            "hermes-core's query builder, please report it with the query"
        ) from exc


def _rank(
    archive: SessionArchive, plan: SearchPlan, scope: _Scope, table: str, expr: str, score: str,
    filters: list[tuple[str, str]], budget: int,
) -> tuple[list[Candidate], bool]:
    """Every match ranked when there are at most ``budget``; else a sample across history.
    Returns (candidates best first, whether the query was too broad to rank exactly)."""
    where = [f"{table} MATCH :expr", *scope.where]
    params: dict[str, Any] = dict(scope.params, expr=expr, cap=budget + 1)
    for i, (ftable, fexpr) in enumerate(filters):
        where.append(
            f"EXISTS (SELECT 1 FROM {ftable} WHERE {ftable} MATCH :f{i} AND rowid = d.rowid)"
        )
        params[f"f{i}"] = fexpr
    clause = " AND ".join(where)
    count = _read(archive, plan, f"{scope.prefix} SELECT count(*) FROM (SELECT 1 FROM {table} "
                  f"AS d WHERE {clause} LIMIT :cap)", params)[0][0]
    if count == 0:
        return [], False
    base = f"{scope.prefix} SELECT d.rowid, {score} AS s FROM {table} AS d WHERE {clause}"
    if count <= budget:
        rows = _read(archive, plan, f"{base} ORDER BY s, d.rowid DESC", params)
        broad = False
    else:
        lo, hi = archive.db.read(  # two subqueries: each is one index step
            "SELECT (SELECT min(id) FROM messages), (SELECT max(id) FROM messages)")[0]
        step = max(1, (hi - lo + SLICES) // SLICES)
        per = min(PER_SLICE, max(1, budget // SLICES))
        rows = []
        for k in range(SLICES):
            part = dict(params, lo=lo + k * step, hi=lo + (k + 1) * step - 1, per=per)
            rows += _read(archive, plan, f"{base} AND d.rowid BETWEEN :lo AND :hi "
                          "ORDER BY d.rowid DESC LIMIT :per", part)
        broad = True
    found = [Candidate(r[0], float(r[1])) for r in rows]
    found.sort(key=lambda c: (c.score, -c.id))
    return found, broad


def _count(archive: SessionArchive, plan: SearchPlan, scope: _Scope, expr: str,
           budget: int) -> int:
    params = dict(scope.params, expr=expr, cap=budget + 1)
    where = " AND ".join(["messages_fts MATCH :expr", *scope.where])
    return int(_read(archive, plan, f"{scope.prefix} SELECT count(*) FROM (SELECT 1 FROM "
                     f"messages_fts AS d WHERE {where} LIMIT :cap)", params)[0][0])


def candidates(
    archive: SessionArchive,
    plan: SearchPlan,
    *,
    fallback: bool = False,
    loose: bool = False,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = DEFAULT_CANDIDATES,
    broad: list[bool] | None = None,
    user: str | None = None,
) -> list[Candidate]:
    """The matches of ``plan`` (best first), after exclusions; see the module docstring for
    how many are ranked. ``broad``, when given, gets True appended for a too-broad query; with
    ``user``, only in that user's sessions."""
    scope = _Scope(plan, exclude_lineage_of, roles, user)
    return _candidates(archive, plan, scope, fallback=fallback, loose=loose, limit=limit,
                       broad=broad if broad is not None else [])


def _candidates(
    archive: SessionArchive, plan: SearchPlan, scope: _Scope, *, fallback: bool, loose: bool,
    limit: int, broad: list[bool],
) -> list[Candidate]:
    if archive.backend == "postgresql":  # storage.url: pg_search.py
        from .pg_search import pg_candidates

        return pg_candidates(archive, plan, fallback=fallback, roles=scope.roles, limit=limit,
                             exclude_lineage_of=scope.lineage, user=scope.user, broad=broad)
    op = "OR" if fallback else "AND"
    text_expr = plan.fallback if fallback else (plan.loose if loose else plan.strict)
    longs, shorts = plan.cjk_long, plan.cjk_short
    if fallback and sum(map(bool, (text_expr, longs, shorts))) > 1:
        # OR across kinds of index: run each kind alone and merge.
        parts: list[Candidate] = []
        for sub in (
            SearchPlan(plan.text, strict=text_expr, fallback=text_expr,
                       fallback_terms=plan.fallback_terms) if text_expr else None,
            SearchPlan(plan.text, cjk=longs) if longs else None,
            SearchPlan(plan.text, cjk=shorts) if shorts else None,
        ):
            if sub is not None:
                parts += _candidates(archive, sub, scope, fallback=len(sub.cjk) > 1 or (
                    sub.fallback_terms != []), loose=False, limit=limit, broad=broad)
        best: dict[int, Candidate] = {}
        for c in parts:
            if c.id not in best or c.score < best[c.id].score:
                best[c.id] = c
        return sorted(best.values(), key=lambda c: (c.score, -c.id))
    if fallback and text_expr and not longs and not shorts and len(plan.fallback_terms) > 1:
        # Rank the distinctive words' matches exactly; common words only when all are common.
        counted = sorted((_count(archive, plan, scope, t, limit), t) for t in plan.fallback_terms)
        chosen: list[str] = []
        total = 0
        for n, term in counted:
            if n == 0 or n > limit or total + n > 4 * limit:
                continue
            chosen.append(term)
            total += n
        if chosen:
            found, _ = _rank(archive, plan, scope, "messages_fts", " OR ".join(chosen),
                             f"bm25(messages_fts, {_WEIGHTS})", [], 4 * limit)
            return found
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
    found, was_broad = _rank(archive, plan, scope, table, expr, score, filters, limit)
    if was_broad:
        broad.append(True)
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
    broad: list[bool] | None = None,
    user: str | None = None,
) -> tuple[list[Candidate], str]:
    """Candidates for the strict query; when it finds none, for every word of it (glued words
    split), then for any word. Returns (candidates, which try matched)."""
    scope = _Scope(plan, exclude_lineage_of, roles, user)
    flags: list[bool] = broad if broad is not None else []
    kwargs: dict[str, Any] = {"limit": limit, "broad": flags}
    found = drop_echoes(archive, _candidates(archive, plan, scope, fallback=False, loose=False,
                                             **kwargs))
    if found:
        return found, "expression" if plan.advanced else "all"
    if plan.loose is not None:
        found = drop_echoes(archive, _candidates(archive, plan, scope, fallback=False,
                                                 loose=True, **kwargs))
        if found:
            return found, "words"
    if plan.fallback is not None:
        return drop_echoes(archive, _candidates(archive, plan, scope, fallback=True, loose=False,
                                                **kwargs)), "any"
    return [], "expression" if plan.advanced else "all"


def drop_echoes(archive: SessionArchive, found: list[Candidate]) -> list[Candidate]:
    """``found`` without the search tools' echoes among its best ``ECHO_CHECK`` (echoes.py).

    Checked after ranking, on the few candidates that can be shown: a test per match inside
    the ranking query would read each message's row (its tool name sits after the content,
    in overflow pages for a long message) and cost more than the ranking itself. On
    PostgreSQL the candidates come without echoes already (pg_search.py tests the rows its
    ranking reads anyway, and checks the others with :func:`check_echoes`).
    """
    if archive.backend == "postgresql":
        return found
    return check_echoes(archive, found)


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
    query = clean_text(query)[0]  # lone surrogates: replaced, as the archive stores them
    plan = plan_query(archive, query)
    broad: list[bool] = []
    found, matched = run_plan(archive, plan, exclude_lineage_of=exclude_lineage_of, roles=roles,
                              limit=candidate_limit, broad=broad, user=user)
    return SearchResult(
        query=query, hits=hits_for(archive, found[:limit], plan, context=context),
        matched=matched, capped=bool(broad),
    )
