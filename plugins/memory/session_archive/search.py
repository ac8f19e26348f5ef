"""Searching the archive: ranked message hits, and the grouped view the session_search tool shows.

Ranking is FTS5's BM25 over every match of the query: one statement scores each match and keeps
the best ``candidates`` (default 2,000) in SQLite's top-k sorter (``ORDER BY score LIMIT k``),
so the best message is found wherever it sits in the history, however many messages match. The
cost grows with the number of matches (about a microsecond each for a word; see
docs/session-archive.md), as a plain FTS5 ``ORDER BY rank`` query's does. The any-word fallback
is the OR of every word, ranked the same way.

Exclusions (the current session's lineage, roles, ``-word`` exclusions and the per-user scope)
are applied inside the same SQL statement, so they never eat into the candidates. The search
tools' own echoes are checked after ranking, on the best candidates (drop_echoes): a search
tool's result is a copy of earlier messages, and the call that asked for it holds the query's
own words: both would outrank the conversation they echo, so they are not shown.
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
    "allowed_ids",
    "attach_chains",
    "candidates",
    "full_content",
    "make_snippet",
    "matching_ids",
    "plan_query",
    "search_messages",
]

#: how many of the best matches a search keeps (for grouping by conversation and fusion)
DEFAULT_CANDIDATES = 2000
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
    filters: list[tuple[str, str]], limit: int,
) -> list[Candidate]:
    """The best ``limit`` matches, every match scored (ties: newest first), in one statement."""
    where = [f"{table} MATCH :expr", *scope.where]
    params: dict[str, Any] = dict(scope.params, expr=expr, k=limit)
    for i, (ftable, fexpr) in enumerate(filters):
        where.append(
            f"EXISTS (SELECT 1 FROM {ftable} WHERE {ftable} MATCH :f{i} AND rowid = d.rowid)"
        )
        params[f"f{i}"] = fexpr
    rows = _read(archive, plan, f"{scope.prefix} SELECT d.rowid, {score} AS s FROM {table} AS d "
                 f"WHERE {' AND '.join(where)} ORDER BY s, d.rowid DESC LIMIT :k", params)
    return [Candidate(r[0], float(r[1])) for r in rows]


def candidates(
    archive: SessionArchive,
    plan: SearchPlan,
    *,
    fallback: bool = False,
    loose: bool = False,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = DEFAULT_CANDIDATES,
    user: str | None = None,
) -> list[Candidate]:
    """The best ``limit`` matches of ``plan`` (best first) among all of them, after exclusions;
    with ``user``, only in that user's sessions."""
    scope = _Scope(plan, exclude_lineage_of, roles, user)
    return _candidates(archive, plan, scope, fallback=fallback, loose=loose, limit=limit)


def _candidates(
    archive: SessionArchive, plan: SearchPlan, scope: _Scope, *, fallback: bool, loose: bool,
    limit: int,
) -> list[Candidate]:
    if archive.backend == "postgresql":  # storage.url: pg_search.py
        from .pg_search import pg_candidates

        return pg_candidates(archive, plan, fallback=fallback, roles=scope.roles, limit=limit,
                             exclude_lineage_of=scope.lineage, user=scope.user)
    text_expr = plan.fallback if fallback else (plan.loose if loose else plan.strict)
    longs, shorts = plan.cjk_long, plan.cjk_short
    if fallback and sum(map(bool, (text_expr, longs, shorts))) > 1:
        return _any_kind(archive, plan, scope, text_expr, limit)
    driver = _driver(text_expr, longs, shorts, "OR" if fallback else "AND")
    if driver is None:
        return []
    table, expr, score, filters = driver
    return _rank(archive, plan, scope, table, expr, score, filters, limit)


def _any_kind(archive: SessionArchive, plan: SearchPlan, scope: _Scope, text_expr: str | None,
              limit: int) -> list[Candidate]:
    """OR across kinds of index: the best of each kind, merged (each kind's top ``limit``
    holds every candidate of the union's top ``limit``)."""
    longs, shorts = plan.cjk_long, plan.cjk_short
    parts: list[Candidate] = []
    for sub in (
        SearchPlan(plan.text, strict=text_expr, fallback=text_expr,
                   fallback_terms=plan.fallback_terms) if text_expr else None,
        SearchPlan(plan.text, cjk=longs) if longs else None,
        SearchPlan(plan.text, cjk=shorts) if shorts else None,
    ):
        if sub is not None:
            parts += _candidates(archive, sub, scope, fallback=len(sub.cjk) > 1 or (
                sub.fallback_terms != []), loose=False, limit=limit)
    best: dict[int, Candidate] = {}
    for c in parts:
        if c.id not in best or c.score < best[c.id].score:
            best[c.id] = c
    return sorted(best.values(), key=lambda c: (c.score, -c.id))[:limit]


def _driver(text_expr: str | None, longs: list[str], shorts: list[str], op: str,
            ) -> tuple[str, str, str, list[tuple[str, str]]] | None:
    """The driving index (the most selective one that has a term: table, expression, score)
    and the other indexes' terms as filters; None when there is no term."""
    filters: list[tuple[str, str]] = []
    if longs:
        if shorts:
            filters.append(("messages_cjk_grams", _cjk_expr(shorts, op)))
        if text_expr:
            filters.append(("messages_fts", text_expr))
        return "messages_cjk", _cjk_expr(longs, op), "bm25(messages_cjk)", filters
    if shorts:
        if text_expr:
            filters.append(("messages_fts", text_expr))
        return "messages_cjk_grams", _cjk_expr(shorts, op), "0.0", filters
    if text_expr:
        return "messages_fts", text_expr, f"bm25(messages_fts, {_WEIGHTS})", filters
    return None


def attach_chains(archive: SessionArchive, found: list[Candidate]) -> None:
    """Fill in each candidate's compaction chain (one query per 900)."""
    chains = dict(archive.read_in(
        "SELECT m.id, s.chain FROM messages AS m JOIN sessions AS s ON s.num = m.session "
        "WHERE m.id IN ({marks})", [c.id for c in found]))
    for c in found:
        c.chain = chains.get(c.id, 0)


def run_plan(
    archive: SessionArchive,
    plan: SearchPlan,
    *,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = DEFAULT_CANDIDATES,
    user: str | None = None,
    want: int | None = None,
) -> tuple[list[Candidate], str]:
    """The best ``limit`` candidates for the strict query; when it finds none, for every word
    of it (glued words split), then for any word. Returns (candidates, which try matched).

    ``want``: only the best ``want`` are needed (search_messages): fewer are ranked out and
    checked for echoes, more only when echoes left fewer than ``want``."""
    scope = _Scope(plan, exclude_lineage_of, roles, user)

    def best(fallback: bool, loose: bool) -> list[Candidate]:
        k = limit if want is None else min(limit, 2 * want + 10)
        while True:
            found = _candidates(archive, plan, scope, fallback=fallback, loose=loose, limit=k)
            kept = drop_echoes(archive, found)
            if want is None or len(kept) >= want or len(found) < k or k >= limit:
                return kept
            k = min(limit, 4 * k)  # echoes took their place: rank further

    found = best(False, False)
    if found:
        return found, "expression" if plan.advanced else "all"
    if plan.loose is not None:
        found = best(False, True)
        if found:
            return found, "words"
    if plan.fallback is not None:
        return best(True, False), "any"
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
    found, matched = run_plan(archive, plan, exclude_lineage_of=exclude_lineage_of, roles=roles,
                              limit=candidate_limit, user=user, want=limit)
    return SearchResult(
        query=query, hits=hits_for(archive, found[:limit], plan, context=context),
        matched=matched,
    )


def allowed_ids(archive: SessionArchive, ids: list[int], *, roles: tuple[str, ...] | None,
                user: str | None) -> set[int]:
    """The ids among ``ids`` whose role is in ``roles`` (when given) and whose session belongs to
    ``user`` (when given; ``""``: sessions without a user key): one query per 900 ids."""
    where: list[str] = []
    extra: list[str] = []
    if roles:
        where.append(f"m.role IN ({','.join('?' * len(roles))})")
        extra.extend(roles)
    if user is not None:
        where.append("coalesce(s.user_id, '') = ?")
        extra.append(user)
    return {r[0] for r in archive.read_in(
        "SELECT m.id FROM messages AS m JOIN sessions AS s ON s.num = m.session WHERE m.id IN "
        f"({{marks}}) AND {' AND '.join(where or ['1 = 1'])}", ids, extra)}


def matching_ids(archive: SessionArchive, expression: str, ids: list[int]) -> set[int]:
    """The ids among ``ids`` whose message matches the FTS5 ``expression`` (query.py's form),
    on either backend: one query per 900 ids."""
    if archive.backend == "postgresql":
        from .pg_search import tsquery_text

        sql = ("SELECT id FROM messages WHERE id IN ({marks}) AND "
               "coalesce(ts_match_vq(tsv, to_tsquery('english', ?)), false)")
        expr = tsquery_text(expression)
        if not expr:
            return set()
    else:
        sql = "SELECT rowid FROM messages_fts WHERE rowid IN ({marks}) AND messages_fts MATCH ?"
        expr = expression
    return {int(r[0]) for r in archive.read_in(sql, ids, (expr,))}
