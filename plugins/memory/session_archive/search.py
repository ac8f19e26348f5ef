"""Searching the archive: ranked message candidates on either backend, and the search's hits.

SQLite ranks by FTS5's BM25 over every match of the query: one statement scores each match and
keeps the best ``candidates`` (default 2,000) in SQLite's top-k sorter (``ORDER BY score LIMIT
k``), so the best message is found wherever it sits in the history, however many messages
match. The cost grows with the number of matches (about a microsecond each for a word; see
docs/session-archive.md), as a plain FTS5 ``ORDER BY rank`` query's does. The any-word fallback
is the OR of every word, ranked the same way. CJK queries run on the CJK indexes; 1-2 character
runs have no term statistics (the grams index stores rowids only), so those matches come newest
first.

PostgreSQL (``storage.url``) runs the same plan: :func:`tsquery_text` turns the FTS5
expressions query.py emits (quoted phrases, optionally ``*`` for a prefix, ``AND``, ``OR``,
``NOT``, parentheses) into ``to_tsquery`` input for the ``english`` configuration: a phrase
becomes a PostgreSQL phrase (``<->``), a prefix ``:*``. Scores are ``ts_rank_cd`` (cover
density), negated so that lower is better on both backends. Every match is ranked in one
statement that keeps the best ``limit`` in PostgreSQL's top-N sort; its cost is one table row
per match (the tsvector is kept in the row by migration 5). CJK runs are matched as substrings
of the message's CJK text (``messages.cjk``, trigram index; runs of one or two letters in an
index holding the runs of the few messages that have any), newest first. A query whose words
are all stopwords of the ``english`` configuration has no lexemes left: it is then matched as a
case-insensitive substring of every message (so it is never silently empty), newest first.

Exclusions (the current session's lineage, roles, ``-word`` exclusions and the per-user scope:
:class:`_Scope`, in each backend's terms) are applied inside the same SQL statement, so they
never eat into the candidates. The search tools' own echoes are left out too: a search tool's
result (``session_search``, or the lossless engine's ``context_search``) is a copy of earlier
messages, and the call that asked for it holds the query's own words: both would outrank the
conversation they echo. Both backends leave them out by the same rule: a message of an echo tool
(:data:`ECHO_TOOLS`), or a message calling one with at most :data:`ECHO_CONTENT` characters of
its own. SQLite checks them after ranking, on the best candidates (:func:`drop_echoes`);
PostgreSQL tests the row its ranking reads anyway.
What a hit shows (snippets, neighbours) is _excerpts.py's.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._excerpts import Hit, hits_for
from .errors import QueryError
from .impacts import WEIGHTS, top_k
from .pg_schema import SPLIT_CHARS
from .query import MIN_PREFIX, SearchPlan, build_query, quote, word_for_stem
from .records import Candidate, best_of, clean_text, like_pattern
from .store import LINEAGE_CTE, SessionArchive

__all__ = [
    "ECHO_CHECK",
    "ECHO_CONTENT",
    "ECHO_NAMES",
    "ECHO_TOOLS",
    "Candidate",
    "SearchResult",
    "allowed_ids",
    "attach_chains",
    "calls_echo",
    "candidates",
    "check_echoes",
    "matching_ids",
    "plan_query",
    "search_messages",
    "tsquery_text",
]

#: how many of the best matches a search keeps (for grouping by conversation and fusion)
DEFAULT_CANDIDATES = 2000
#: column weights for BM25: content, tool name, tool-call argument values
_WEIGHTS = ", ".join(map(str, WEIGHTS))
#: a prefix is also matched by indexed stems up to this many characters shorter
_STEM_SLACK = 4

#: tools whose results only repeat archived messages, and whose calls repeat a query
ECHO_TOOLS = ("session_search", "context_search")
#: a message calling an echo tool with at most this much text of its own is a pure echo
ECHO_CONTENT = 300
#: how many of the best candidates are checked for echoes (the rest are never shown)
ECHO_CHECK = 300
#: the echo tools' names as an SQL list
ECHO_NAMES = ", ".join(f"'{t}'" for t in ECHO_TOOLS)


def calls_echo(calls: str) -> str:
    """The SQL condition that the tool calls (JSON text) in column ``calls`` call an echo tool."""
    return " OR ".join(f"{calls} LIKE '%\"name\":\"{t}\"%'" for t in ECHO_TOOLS)


def check_echoes(archive: SessionArchive, found: list[Candidate]) -> list[Candidate]:
    """``found`` without the echoes among its best :data:`ECHO_CHECK` (one query)."""
    head, tail = found[:ECHO_CHECK], found[ECHO_CHECK:]
    if not head:
        return found
    echoes = {r[0] for r in archive.db.read(
        f"SELECT id FROM messages WHERE id IN ({','.join('?' * len(head))}) AND "
        f"(tool_name IN ({ECHO_NAMES}) OR (tool_calls IS NOT NULL AND "
        f"length(content) <= {ECHO_CONTENT} AND ({calls_echo('tool_calls')})))",
        tuple(c.id for c in head))}
    if not echoes:
        return found
    return [c for c in head if c.id not in echoes] + tail


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
                found = _indexes_word(archive, quote(word))
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


#: the conditions of a search's scope on SQLite (see _Scope), on the FTS5 table's ``d.rowid``:
#: the message row is read through a subquery only where a condition needs it
_SCOPE = {
    "user": "(SELECT coalesce(s.user_id, '') FROM messages AS m JOIN sessions AS s "
            "ON s.num = m.session WHERE m.id = d.rowid) = :user",
    # a set of message ids computed once, probed per match: cheaper than joining messages
    "lineage": "d.rowid NOT IN (SELECT id FROM messages WHERE session IN "
               "(SELECT num FROM lineage))",
    "roles": "(SELECT role FROM messages WHERE id = d.rowid) IN ({marks})",
    "exclude": "d.rowid NOT IN (SELECT rowid FROM messages_fts WHERE messages_fts "
               "MATCH :exclude)",
}


class _Scope:
    """The conditions every try of one search shares: the user's sessions (memory.scope: user),
    not the current session's lineage, the roles asked for and no ``-word`` exclusion, in the
    backend's terms (``_SCOPE``, ``_PG_SCOPE``)."""

    def __init__(self, archive: SessionArchive, plan: SearchPlan,
                 exclude_lineage_of: str | None, roles: tuple[str, ...] | None,
                 user: str | None = None) -> None:
        spelling, exclude = _SCOPE, plan.exclude
        if archive.backend == "postgresql":
            spelling, exclude = _PG_SCOPE, tsquery_text(plan.exclude) if plan.exclude else None
        self.prefix = LINEAGE_CTE if exclude_lineage_of else ""
        self.where: list[str] = []
        self.params: dict[str, Any] = {}
        if user is not None:
            self.where.append(spelling["user"])
            self.params["user"] = user
        if exclude_lineage_of:
            self.where.append(spelling["lineage"])
            self.params["sid"] = clean_text(exclude_lineage_of)[0]
        if roles:
            marks = ", ".join(f":r{i}" for i in range(len(roles)))
            self.where.append(spelling["roles"].format(marks=marks))
            self.params.update({f"r{i}": r for i, r in enumerate(roles)})
        if exclude:
            self.where.append(spelling["exclude"])
            self.params["exclude"] = exclude


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
    """The best ``limit`` matches, every match scored (ties: newest first), in one statement;
    a common word alone from its best messages kept at write time (impacts.py), the same."""
    if table == "messages_fts" and not filters and archive.backend == "sqlite":
        with archive.db.lock:
            try:
                kept = top_k(archive.db.con, expr, score, scope.prefix, scope.where,
                             scope.params, limit)
            except sqlite3.Error:  # the statement below reports what is wrong
                kept = None
        if kept is not None:
            return [Candidate(i, s) for i, s in kept]
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
    scope = _Scope(archive, plan, exclude_lineage_of, roles, user)
    return _candidates(archive, plan, scope, fallback=fallback, loose=loose, limit=limit)


def _candidates(
    archive: SessionArchive, plan: SearchPlan, scope: _Scope, *, fallback: bool, loose: bool,
    limit: int,
) -> list[Candidate]:
    if archive.backend == "postgresql":  # storage.url: the tsvector search below
        return _pg_candidates(archive, plan, scope, fallback=fallback, limit=limit)
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
    parts: list[list[Candidate]] = []
    for sub in (
        SearchPlan(plan.text, strict=text_expr, fallback=text_expr,
                   fallback_terms=plan.fallback_terms) if text_expr else None,
        SearchPlan(plan.text, cjk=longs) if longs else None,
        SearchPlan(plan.text, cjk=shorts) if shorts else None,
    ):
        if sub is not None:
            parts.append(_candidates(archive, sub, scope, fallback=len(sub.cjk) > 1 or (
                sub.fallback_terms != []), loose=False, limit=limit))
    return best_of(parts, limit)


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


# ---------------------------------------------------------------------- PostgreSQL

_TOKEN = re.compile(r'"((?:[^"]|"")*)"(\*?)|\b(AND|OR|NOT)\b|([()])')
# characters with a meaning in to_tsquery input, and those the documents' index reads as
# spaces (pg_schema.SPLIT_CHARS): inside a term they only separate words
_TSQ_SPECIAL = re.compile("[" + re.escape("\\':&|!()<>*" + SPLIT_CHARS) + "]")


def _term(text: str, prefix: bool) -> str:
    words = _TSQ_SPECIAL.sub(" ", text.replace('""', '"').replace('"', " ")).split()
    if not words:
        return ""
    if prefix:
        words[-1] = f"{words[-1]}:*"
        return "(" + " <-> ".join(f"'{w[:-2]}':*" if w.endswith(":*") else f"'{w}'"
                                  for w in words) + ")"
    return "'" + " ".join(words) + "'"


def tsquery_text(expr: str) -> str:
    """An FTS5 expression made by query.py as ``to_tsquery`` input."""
    out: list[str] = []
    for m in _TOKEN.finditer(expr):
        text, star, op, paren = m.groups()
        if text is not None:
            term = _term(text, bool(star))
            if term:
                out.append(term)
        elif op is not None:
            out.append({"AND": "&", "OR": "|", "NOT": "& !"}[op])
        else:
            out.append(paren)
    return " ".join(out)


#: the text match as the index answers it
_INDEXED_MATCH = "m.tsv @@ to_tsquery('english', :q)"
#: not one of a compaction's carried-over copies (tested where no index leaves them out)
_CARRIED = "(m.meta IS NULL OR (m.meta::jsonb -> 'carried_over') IS NULL)"
#: the conditions of a search's scope on PostgreSQL (see _Scope), on the row ``m`` the ranking
#: reads anyway
_PG_SCOPE = {
    "user": "m.session IN (SELECT num FROM sessions WHERE coalesce(user_id, '') = :user)",
    "lineage": "m.session NOT IN (SELECT num FROM lineage)",
    "roles": "m.role IN ({marks})",
    # a message holding none of the query's excluded words (-word); NULL tsv (a carried-over
    # copy): not excluded here, those are left out by the other conditions
    "exclude": "NOT coalesce(ts_match_vq(m.tsv, to_tsquery('english', :exclude)), false)",
}


def _pg_candidates(archive: SessionArchive, plan: SearchPlan, scope: _Scope, *, fallback: bool,
                   limit: int) -> list[Candidate]:
    """The best ``limit`` matches of ``plan`` among all of them (best first), in ``scope``."""
    text_expr = plan.fallback if fallback else plan.strict
    joiner = " OR " if fallback else " AND "
    params: dict[str, Any] = dict(scope.params, q=tsquery_text(text_expr or ""), k=limit)
    cjk = []
    for i, run in enumerate(plan.cjk):
        params[f"c{i}"] = f"%{like_pattern(run)}%"
        cjk.append(f"m.cjk LIKE :c{i}")

    def read(where: list[str], rank: str = "0.0", order: str = "m.id DESC") -> list[Candidate]:
        return [Candidate(int(r[0]), float(r[1])) for r in archive.db.read(
            f"{scope.prefix} SELECT m.id, {rank} AS s FROM messages AS m "
            f"WHERE {' AND '.join([*scope.where, *where])} ORDER BY {order} LIMIT :k", params)]

    def cjk_only(joiner: str) -> list[Candidate]:
        """The messages matching the CJK runs (joined by ``joiner``), newest first."""
        return check_echoes(archive, read(["m.cjk IS NOT NULL", f"({joiner.join(cjk)})"]))

    # A compaction's carried-over copies are left out: their tsv and cjk are NULL (the index
    # trigger), so the text and CJK matches exclude them by themselves (which lets CJK runs be
    # read from their index alone); the substring match checks the mark.
    if not text_expr:
        return cjk_only(joiner) if cjk else []
    # the query inline (not from a CTE): the planner then knows its words' frequencies
    found = read([_INDEXED_MATCH, _not_echo(),
                  *([f"({joiner.join(cjk)})"] if cjk and not fallback else [])],
                 "-ts_rank_cd(m.tsv, to_tsquery('english', :q))", "s, m.id DESC")
    if not found and not _has_lexemes(archive, params["q"]):
        # stopwords only (no lexemes): the words as case-insensitive substrings of the
        # messages (carried-over copies left out), newest first
        likes = []
        for i, needle in enumerate([n for n in plan.needles if n not in plan.cjk]
                                   or [plan.text.strip()]):
            params[f"n{i}"] = f"%{like_pattern(needle)}%"
            likes.append(f"m.content ILIKE :n{i}")
        found = check_echoes(archive, read([_CARRIED, f"({joiner.join(likes + cjk)})"]))
    if cjk and fallback:  # OR: messages matching only a CJK run count too
        found = best_of([found, cjk_only(" OR ")], limit)
    return found


def _has_lexemes(archive: SessionArchive, q: str) -> bool:
    """Whether ``q`` keeps a lexeme in the ``english`` configuration (not stopwords only)."""
    return int(archive.db.read("SELECT numnode(to_tsquery('english', :q))", {"q": q})[0][0]) > 0


def _indexes_word(archive: SessionArchive, term: str) -> bool:
    """Whether the text index holds ``term`` (a quoted FTS5 term, as query.py quotes it) for some
    message: the PostgreSQL side of the prefix expansion (:func:`stem_expander`)."""
    return bool(archive.db.read(
        "SELECT 1 FROM messages AS m WHERE m.tsv @@ to_tsquery('english', :q) LIMIT 1",
        {"q": tsquery_text(term)}))


@functools.lru_cache(maxsize=1)
def _not_echo() -> str:
    """Not one of the search tools' own echoes: echoes.py's rule as a test of the row the
    ranking reads anyway; octet_length reads a long content's size without fetching
    it (a character is at most 4 bytes)."""
    return (f"NOT (coalesce(m.tool_name IN ({ECHO_NAMES}), false) OR (m.tool_calls IS NOT NULL "
            f"AND octet_length(m.content) <= {4 * ECHO_CONTENT} AND "
            f"length(m.content) <= {ECHO_CONTENT} AND ({calls_echo('m.tool_calls')})))")


def attach_chains(archive: SessionArchive, found: list[Candidate]) -> None:
    """Fill in the compaction chain of each candidate that has none yet (one query per 900;
    none when the hybrid ranking, which groups by conversation, read them all already)."""
    missing = [c for c in found if not c.chain]
    if not missing:
        return
    chains = dict(archive.read_in(
        "SELECT m.id, s.chain FROM messages AS m JOIN sessions AS s ON s.num = m.session "
        "WHERE m.id IN ({marks})", [c.id for c in missing]))
    for c in missing:
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
    scope = _Scope(archive, plan, exclude_lineage_of, roles, user)

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
    # the tsvector ranking has no loose form: on PostgreSQL that try is the strict one again
    if plan.loose is not None and archive.backend != "postgresql":
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
    PostgreSQL the candidates come without echoes already (_pg_candidates tests the rows its
    ranking reads anyway, and checks the others with :func:`check_echoes`).
    """
    if archive.backend == "postgresql":
        return found
    return check_echoes(archive, found)


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
        sql = ("SELECT id FROM messages WHERE id IN ({marks}) AND "
               "coalesce(ts_match_vq(tsv, to_tsquery('english', ?)), false)")
        expr = tsquery_text(expression)
        if not expr:
            return set()
    else:
        sql = "SELECT rowid FROM messages_fts WHERE rowid IN ({marks}) AND messages_fts MATCH ?"
        expr = expression
    return {int(r[0]) for r in archive.read_in(sql, ids, (expr,))}
