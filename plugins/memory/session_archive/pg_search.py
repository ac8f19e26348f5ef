"""Search candidates in the PostgreSQL archive: the same plan and rules as the FTS5 search.

The query planner (query.py) emits FTS5 expressions: quoted phrases (``"..."``, optionally
``*`` for a prefix), ``AND``, ``OR``, ``NOT`` and parentheses. :func:`tsquery_text` turns one
into ``to_tsquery`` input for the ``english`` configuration: a phrase becomes a PostgreSQL
phrase (``<->``), a prefix ``:*``. Scores are ``ts_rank_cd`` (cover density), negated so that
lower is better on both backends.

Every match is ranked: one statement reads the text index's matches, applies the exclusions
(lineage, roles, user, ``-word``, the search tools' own echoes: tested on the row the rank reads
anyway) and keeps the best ``limit`` in PostgreSQL's top-N sort (``ORDER BY score LIMIT k``).
The cost is one table row per match (the tsvector is kept in the row by migration 5), so it
grows with the number of matches, as SQLite's does.

CJK runs are matched as substrings of the message's CJK text (``messages.cjk``, trigram index;
runs of one or two letters in an index holding the runs of the few messages that have any),
newest first. A query whose words are all stopwords of the ``english`` configuration has no
lexemes left: it is then matched as a case-insensitive substring of every message (so it is
never silently empty), newest first.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from .echoes import ECHO_CONTENT, ECHO_TOOLS, check_echoes
from .pg_schema import SPLIT_CHARS
from .query import SearchPlan
from .records import Candidate

__all__ = ["indexes_word", "pg_candidates", "tsquery_text"]

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
#: a message holding none of the query's excluded words (-word); NULL tsv (a carried-over copy):
#: not excluded here, those are left out by the other conditions
_NOT_EXCLUDED = "NOT coalesce(ts_match_vq(m.tsv, to_tsquery('english', :ex)), false)"
#: not one of a compaction's carried-over copies (tested where no index leaves them out)
_CARRIED = "(m.meta IS NULL OR (m.meta::jsonb -> 'carried_over') IS NULL)"


@dataclass
class _PgSearch:
    """One candidate search's statement parts: its parameters, the conditions every statement
    shares (exclusions) and the CJK runs' substring tests."""

    archive: Any
    params: dict[str, Any]
    cte: str = ""
    common: list[str] = field(default_factory=list)
    cjk: list[str] = field(default_factory=list)

    def read(self, select: str) -> list[Candidate]:
        return [Candidate(int(r[0]), float(r[1]))
                for r in self.archive.db.read(f"{self.cte} {select}", self.params)]

    def newest(self, where: list[str]) -> list[Candidate]:
        return self.read(f"SELECT m.id, 0.0 FROM messages AS m WHERE {' AND '.join(where)} "
                         "ORDER BY m.id DESC LIMIT :k")

    def cjk_only(self, joiner: str) -> list[Candidate]:
        """The messages matching the CJK runs (joined by ``joiner``), newest first."""
        return check_echoes(self.archive, self.newest(
            [*self.common, "m.cjk IS NOT NULL", "(" + joiner.join(self.cjk) + ")"]))


def _pg_search(archive: Any, plan: SearchPlan, params: dict[str, Any],
               exclude_lineage_of: str | None, roles: tuple[str, ...] | None,
               user: str | None) -> _PgSearch:
    """The exclusions (lineage, user, roles, ``-word``) and CJK tests of ``plan``, their values
    added to ``params``."""
    from .store import LINEAGE_CTE

    search = _PgSearch(archive, params, LINEAGE_CTE if exclude_lineage_of else "")
    if exclude_lineage_of:
        params["sid"] = exclude_lineage_of
        search.common.append("m.session NOT IN (SELECT num FROM lineage)")
    if user is not None:
        params["user"] = user
        search.common.append(
            "m.session IN (SELECT num FROM sessions WHERE coalesce(user_id, '') = :user)")
    if roles:
        search.common.append(
            "m.role IN (" + ", ".join(f":r{i}" for i in range(len(roles))) + ")")
        params.update({f"r{i}": r for i, r in enumerate(roles)})
    excluded = tsquery_text(plan.exclude) if plan.exclude else ""
    if excluded:  # -word: a message holding the word is left out, as in the FTS5 search
        params["ex"] = excluded
        search.common.append(_NOT_EXCLUDED)
    for i, run in enumerate(plan.cjk):
        params[f"c{i}"] = f"%{_like(run)}%"
        search.cjk.append(f"m.cjk LIKE :c{i}")
    return search


def _substring_matches(search: _PgSearch, plan: SearchPlan, joiner: str) -> list[Candidate]:
    """A query of stopwords only (no lexemes): its words as case-insensitive substrings of the
    messages (carried-over copies left out), newest first."""
    needles = [n for n in plan.needles if n not in plan.cjk] or [plan.text.strip()]
    likes = []
    for i, needle in enumerate(needles):
        search.params[f"n{i}"] = f"%{_like(needle)}%"
        likes.append(f"m.content ILIKE :n{i}")
    cjk = search.cjk
    return check_echoes(search.archive, search.newest([*search.common, _CARRIED, "(" + joiner.join(
        likes) + (f"{joiner}{joiner.join(cjk)}" if cjk else "") + ")"]))


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
    """The best ``limit`` matches of ``plan`` among all of them (best first), after
    exclusions."""
    text_expr = plan.fallback if fallback else plan.strict
    joiner = " OR " if fallback else " AND "
    params: dict[str, Any] = {"q": tsquery_text(text_expr or ""), "k": limit}
    # A compaction's carried-over copies are left out: their tsv and cjk are NULL (the index
    # trigger), so the text and CJK matches exclude them by themselves (which lets CJK runs be
    # read from their index alone); the substring match checks the mark.
    search = _pg_search(archive, plan, params, exclude_lineage_of, roles, user)
    if not text_expr:
        return search.cjk_only(joiner) if search.cjk else []
    # the query inline (not from a CTE): the planner then knows its words' frequencies
    where = [*search.common, _INDEXED_MATCH, _not_echo(),
             *([f"({joiner.join(search.cjk)})"] if search.cjk and not fallback else [])]
    found = search.read(f"SELECT m.id, -ts_rank_cd(m.tsv, to_tsquery('english', :q)) AS s "
                        f"FROM messages AS m WHERE {' AND '.join(where)} "
                        "ORDER BY s, m.id DESC LIMIT :k")
    if not found and not _has_lexemes(archive, params["q"]):  # stopwords only: a substring
        found = _substring_matches(search, plan, joiner)
    if search.cjk and fallback:  # OR: messages matching only a CJK run count too
        best = {c.id: c for c in found}
        for c in search.cjk_only(" OR "):
            if c.id not in best or c.score < best[c.id].score:
                best[c.id] = c
        found = sorted(best.values(), key=lambda c: (c.score, -c.id))[:limit]
    return found


def _has_lexemes(archive: Any, q: str) -> bool:
    """Whether ``q`` keeps a lexeme in the ``english`` configuration (not stopwords only)."""
    return int(archive.db.read("SELECT numnode(to_tsquery('english', :q))", {"q": q})[0][0]) > 0


def indexes_word(archive: Any, term: str) -> bool:
    """Whether the text index holds ``term`` (a quoted FTS5 term, as query.py quotes it) for some
    message: the PostgreSQL side of search.py's prefix expansion."""
    return bool(archive.db.read(
        "SELECT 1 FROM messages AS m WHERE m.tsv @@ to_tsquery('english', :q) LIMIT 1",
        {"q": tsquery_text(term)}))


@functools.lru_cache(maxsize=1)
def _not_echo() -> str:
    """Not one of the search tools' own echoes: echoes.py's rule as a test of the row the
    ranking reads anyway; octet_length reads a long content's size without fetching
    it (a character is at most 4 bytes)."""
    names = ", ".join(f"'{t}'" for t in ECHO_TOOLS)
    likes = " OR ".join(f"m.tool_calls LIKE '%\"name\":\"{t}\"%'" for t in ECHO_TOOLS)
    return (f"NOT (coalesce(m.tool_name IN ({names}), false) OR (m.tool_calls IS NOT NULL AND "
            f"octet_length(m.content) <= {4 * ECHO_CONTENT} AND "
            f"length(m.content) <= {ECHO_CONTENT} AND ({likes})))")


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
