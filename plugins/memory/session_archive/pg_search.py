"""Search candidates in the PostgreSQL archive: the same plan and rules as the FTS5 search.

The query planner (query.py) emits FTS5 expressions: quoted phrases (``"..."``, optionally
``*`` for a prefix), ``AND``, ``OR``, ``NOT`` and parentheses. :func:`tsquery_text` turns one
into ``to_tsquery`` input for the ``english`` configuration: a phrase becomes a PostgreSQL
phrase (``<->``), a prefix ``:*``. Ranking is ``ts_rank_cd`` (cover density) among the newest
``limit`` matches, as the SQLite archive ranks BM25 among its newest matches; scores are negated
so that lower is better on both backends.

CJK runs are matched as substrings of the message's CJK text (``messages.cjk``, trigram index).
A query whose words are all stopwords of the ``english`` configuration has no lexemes left: it
is then matched as a case-insensitive substring, so such a search is never silently empty.
"""

from __future__ import annotations

import re
from typing import Any

from .pg_schema import SPLIT_CHARS
from .query import SearchPlan

__all__ = ["pg_candidates", "tsquery_text"]

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


def pg_candidates(
    archive: Any,
    plan: SearchPlan,
    *,
    fallback: bool = False,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = 500,
    user: str | None = None,
) -> list[Any]:
    """The newest ``limit`` matches of ``plan`` (best first), after exclusions."""
    from .search import Candidate
    from .store import LINEAGE_CTE

    text_expr = plan.fallback if fallback else plan.strict
    joiner = " OR " if fallback else " AND "
    params: dict[str, Any] = {"limit": limit, "q": tsquery_text(text_expr or "")}
    common: list[str] = ["(m.meta IS NULL OR (m.meta::jsonb -> 'carried_over') IS NULL)"]
    if exclude_lineage_of:
        params["sid"] = exclude_lineage_of
        common.append("m.session NOT IN (SELECT num FROM lineage)")
    if user is not None:
        params["user"] = user
        common.append("m.session IN (SELECT num FROM sessions WHERE coalesce(user_id, '') = :user)")
    if roles:
        common.append("m.role IN (" + ", ".join(f":r{i}" for i in range(len(roles))) + ")")
        params.update({f"r{i}": r for i, r in enumerate(roles)})
    cjk: list[str] = []
    for i, run in enumerate(plan.cjk):
        params[f"c{i}"] = f"%{_like(run)}%"
        cjk.append(f"m.cjk LIKE :c{i}")
    # Two branches in one statement (one round trip): the text index when the query has
    # lexemes; a substring match when the english configuration left none (stopwords only).
    # Each branch's guard is evaluated once (a one-time filter), so only one of them runs.
    branches: list[str] = []
    if text_expr:
        ranked = [*common, "m.tsv @@ (SELECT q FROM q)", *(
            [f"({joiner.join(cjk)})"] if cjk and not fallback else [])]
        branches.append(_branch(ranked, "(SELECT numnode(q) FROM q) > 0"))
        needles = [n for n in plan.needles if n not in plan.cjk] or [plan.text.strip()]
        likes = []
        for i, needle in enumerate(needles):
            params[f"n{i}"] = f"%{_like(needle)}%"
            likes.append(f"m.content ILIKE :n{i}")
        plain = [*common, "(" + joiner.join(likes) + (
            f"{joiner}{joiner.join(cjk)}" if cjk else "") + ")"]
        branches.append(_branch(plain, "(SELECT numnode(q) FROM q) = 0"))
        if cjk and fallback:  # OR: messages matching only a CJK run count too
            branches.append(_branch([*common, "(" + " OR ".join(cjk) + ")"], "TRUE"))
    elif cjk:
        branches.append(_branch([*common, "(" + joiner.join(cjk) + ")"], "TRUE"))
    else:
        return []
    cte = LINEAGE_CTE if exclude_lineage_of else "WITH RECURSIVE lineage(num) AS (SELECT 0)"
    union = " UNION ".join(f"({b})" for b in branches)
    # ranked after the LIMIT, on the few hundred rows left (the union compares ids only)
    sql = (f"{cte}, q AS (SELECT to_tsquery('english', :q) AS q), "
           f"c AS (SELECT id FROM ({union}) AS u ORDER BY id DESC LIMIT :limit) "
           f"SELECT m.id, CASE WHEN m.tsv IS NULL OR (SELECT numnode(q) FROM q) = 0 THEN 0.0 "
           f"ELSE -ts_rank_cd(m.tsv, (SELECT q FROM q)) END FROM c JOIN messages AS m USING (id)")
    rows = archive.db.read(sql, params)
    found = [Candidate(int(r[0]), float(r[1])) for r in rows]
    found.sort(key=lambda c: (c.score, -c.id))
    return found


def _branch(where: list[str], guard: str) -> str:
    return (f"SELECT m.id FROM messages AS m WHERE {guard} AND {' AND '.join(where)} "
            "ORDER BY m.id DESC LIMIT :limit")


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
