"""Search candidates in the PostgreSQL archive: the same plan and rules as the FTS5 search.

The query planner (query.py) emits FTS5 expressions: quoted phrases (``"..."``, optionally
``*`` for a prefix), ``AND``, ``OR``, ``NOT`` and parentheses. :func:`tsquery_text` turns one
into ``to_tsquery`` input for the ``english`` configuration: a phrase becomes a PostgreSQL
phrase (``<->``), a prefix ``:*``. Scores are ``ts_rank_cd`` (cover density), negated so that
lower is better on both backends.

How many matches are ranked follows the SQLite archive's rule: every match when there are at
most ``limit``; for a broader query, the newest matches of each of ``SLICES`` equal slices of
history (a sample spread over all of it, never just the newest):

* how many match: the planner's estimate (one ``EXPLAIN``, no rows read, sent in one round trip
  with the query's size and the ids' range); unless it is far above the budget or far within
  it, the count of the matches: up to twice the budget (several words; one word: up to the
  budget) in the same statement as the read (:meth:`_Search._count_and_read`: the text index's
  matches are visited once for their ids, counted, and only the ones to rank read again, by
  row address, for the rank), else the count of the text index's entries
  (:meth:`_Search.index_count`: the bitmap scan's row count, no table rows read). At most
  ``limit``: the matches are read with ``LIMIT limit + 1`` and all of them ranked exactly (more
  than ``limit``: counted if they were not, then sampled as broad);
* broad: one statement reads the matches of ``SLICES`` short stretches of ids, each at the end of
  its slice and sized for about ``SAMPLE / SLICES`` matches at the counted density (widened when
  it holds too few), in the cheapest of three ways (:func:`_stretch_way`): dense matches (short
  stretches) are tested row by row, read through the primary key; sparse ones are the text
  index's matches intersected with a bitmap of the stretches' ids (the primary key), or, for
  the sparsest (long stretches, whose id bitmap costs more than visiting every match), the text
  index's matches with their ids tested on the row. The rank is computed in the same statement.
  Ranking reads each candidate's tsvector from its row (kept in the row by migration 5), so the
  cost of a search is about one table page per ranked match.
  The search tools' own echoes (echoes.py's rule) are left out in the same
  statement, tested on the rows it reads anyway; CJK and substring matches, read from their
  indexes without the rows, are checked after reading (echoes.py's ``check_echoes``).

CJK runs are matched as substrings of the message's CJK text (``messages.cjk``, trigram index;
runs of one or two letters in an index holding the runs of the few messages that have any),
newest first. A query whose words are all stopwords of the ``english`` configuration has no
lexemes left: it is then matched as a case-insensitive substring (so it is never silently
empty) in ``SLICES`` stretches of ``SLICE_ROWS`` messages spread over all history, or in every
message when the archive is small or the stretches hold no match.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

from .echoes import ECHO_CONTENT, ECHO_TOOLS, check_echoes
from .pg_schema import SPLIT_CHARS
from .query import SearchPlan
from .records import Candidate

__all__ = ["SAMPLE", "SLICES", "indexes_word", "pg_candidates", "tsquery_text"]

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


#: how many matches a broad query ranks (the SQLite archive: 8 slices of 64)
SAMPLE = 512
#: matches are counted in the index (not estimated) when the estimate is at most COUNT_BELOW
#: times the budget; above it the query is sampled at once
COUNT_BELOW = 4
#: an estimate below READ_BELOW times the budget reads the matches without counting them first
READ_BELOW = 0.125
#: an estimate up to ONE_READ_BELOW times the budget (of a query of several words; one word: up
#: to the budget) counts the matches and reads the ones to rank in one statement
#: (_Search._count_and_read) rather than counting them in the index first
ONE_READ_BELOW = 2
#: what reading a sample costs, in microseconds (EXPLAIN ANALYZE at 1M messages on 2 busy
#: cores): testing one row of a stretch, one entry of the query's posting lists in the text
#: index (a word in 100k messages: 40 ms), one ranked match's table page; one id of the
#: stretches put in a bitmap from the primary key, and one match of the text index visited
#: in the table to test its id against the stretches (fitted on the benchmark's queries at 1M
#: messages: a word in 2,700 messages, stretches of 190k ids: 15 ms through the bitmap, 10.5
#: ms visiting every match; a word in 15k, stretches of 33k ids: 8 ms and 29 ms)
ROW_US, POSTING_US, PAGE_US, ID_US, VISIT_US = 1.5, 0.4, 5.0, 0.045, 1.45
#: the text match as the index answers it, and as a test of the row (no index)
_INDEXED_MATCH = "m.tsv @@ to_tsquery('english', :q)"
_ROW_MATCH = "ts_match_vq(m.tsv, to_tsquery('english', :q))"
#: a message holding none of the query's excluded words (-word); NULL tsv (a carried-over copy):
#: not excluded here, those are left out by the other conditions
_NOT_EXCLUDED = "NOT coalesce(ts_match_vq(m.tsv, to_tsquery('english', :ex)), false)"
#: the stopwords-only substring search reads SLICES stretches of SLICE_ROWS messages
SLICES = 8
SLICE_ROWS = 250


def pg_candidates(
    archive: Any,
    plan: SearchPlan,
    *,
    fallback: bool = False,
    exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None,
    limit: int = 500,
    user: str | None = None,
    broad: list[bool] | None = None,
) -> list[Any]:
    """The matches of ``plan`` (best first), after exclusions: all of them when there are at
    most ``limit``, else an even sample of all history (see the module docstring); ``broad``,
    when given, gets True appended for a sampled query."""
    from .store import LINEAGE_CTE

    text_expr = plan.fallback if fallback else plan.strict
    joiner = " OR " if fallback else " AND "
    params: dict[str, Any] = {"q": tsquery_text(text_expr or "")}
    # A compaction's carried-over copies are left out: their tsv and cjk are NULL (the index
    # trigger), so the text and CJK matches exclude them by themselves (which lets CJK runs be
    # read from their index alone); the substring match checks the mark.
    common: list[str] = []
    carried = "(m.meta IS NULL OR (m.meta::jsonb -> 'carried_over') IS NULL)"
    if exclude_lineage_of:
        params["sid"] = exclude_lineage_of
        common.append("m.session NOT IN (SELECT num FROM lineage)")
    if user is not None:
        params["user"] = user
        common.append("m.session IN (SELECT num FROM sessions WHERE coalesce(user_id, '') = :user)")
    if roles:
        common.append("m.role IN (" + ", ".join(f":r{i}" for i in range(len(roles))) + ")")
        params.update({f"r{i}": r for i, r in enumerate(roles)})
    excluded = tsquery_text(plan.exclude) if plan.exclude else ""
    if excluded:  # -word: a message holding the word is left out, as in the FTS5 search
        params["ex"] = excluded
        common.append(_NOT_EXCLUDED)
    cjk: list[str] = []
    for i, run in enumerate(plan.cjk):
        params[f"c{i}"] = f"%{_like(run)}%"
        cjk.append(f"m.cjk LIKE :c{i}")
    cte = LINEAGE_CTE if exclude_lineage_of else "WITH RECURSIVE lineage(num) AS (SELECT 0)"
    search = _Search(archive, cte, params, limit, broad)
    if not text_expr:
        if not cjk:
            return []
        return check_echoes(archive, search.newest(
            [*common, "m.cjk IS NOT NULL", "(" + joiner.join(cjk) + ")"]))
    # the query inline (not from the CTE): the planner then knows its words' frequencies;
    # the search tools' own echoes are left out of the ranked matches here (search.py's
    # drop_echoes, applied to the best 300, would cost a statement reading 300 more rows)
    where = [*common, _INDEXED_MATCH, _not_echo(),
             *([f"({joiner.join(cjk)})"] if cjk and not fallback else [])]
    # the query's size and the ids' range, and the planner's estimate of the matches: one
    # round trip (the estimate is unused for a stopwords-only query)
    first, explained = archive.db.read_many([
        ("SELECT numnode(to_tsquery('english', :q)), (SELECT min(id) FROM messages), "
         "(SELECT max(id) FROM messages)", {"q": params["q"]}),
        (search.estimate_sql([w for w in where if w != _not_echo()]), params)])
    lexemes, low, high = first[0]
    if int(lexemes) > 0:
        found = search.ranked(where, low, high, float(_plan(explained)["Plan"]["Plan Rows"]),
                              nodes=int(lexemes))
    else:  # stopwords only: a substring match
        needles = [n for n in plan.needles if n not in plan.cjk] or [plan.text.strip()]
        likes = []
        for i, needle in enumerate(needles):
            params[f"n{i}"] = f"%{_like(needle)}%"
            likes.append(f"m.content ILIKE :n{i}")
        found = check_echoes(archive, search.substring([*common, carried, "(" + joiner.join(
            likes) + (f"{joiner}{joiner.join(cjk)}" if cjk else "") + ")"], low, high))
    if cjk and fallback:  # OR: messages matching only a CJK run count too
        best = {c.id: c for c in found}
        for c in check_echoes(archive, search.newest(
                [*common, "m.cjk IS NOT NULL", "(" + " OR ".join(cjk) + ")"])):
            if c.id not in best or c.score < best[c.id].score:
                best[c.id] = c
        found = list(best.values())
    found.sort(key=lambda c: (c.score, -c.id))
    return [Candidate(c.id, c.score) for c in found]


class _Search:
    """The statements of one candidate search (they share the CTEs and the parameters)."""

    def __init__(self, archive: Any, cte: str, params: dict[str, Any], limit: int,
                 broad: list[bool] | None) -> None:
        self.db = archive.db
        self.cte = f"{cte}, q AS (SELECT to_tsquery('english', :q) AS q)"
        self.params = params
        self.limit = limit
        self.broad = broad

    def _read(self, select: str, **extra: Any) -> list[Any]:

        rows = self.db.read(f"{self.cte} {select}", {**self.params, **extra})
        return [Candidate(int(r[0]), float(r[1])) for r in rows]

    def _sampled(self) -> None:
        if self.broad is not None:
            self.broad.append(True)

    def estimate_sql(self, where: list[str]) -> str:
        """The statement asking the planner's estimate of the matching rows (nothing is read)."""
        return (f"EXPLAIN (FORMAT JSON) {self.cte} SELECT m.id FROM messages AS m "
                f"WHERE {' AND '.join(where)}")

    def index_count(self) -> int | None:
        """How many messages the text index holds for the query, read from the index alone.

        The bitmap scan of the text index collects every match before the first row is read;
        ``LIMIT 1`` then stops after one row, and ``EXPLAIN ANALYZE`` reports how many
        entries the index scan returned. That is an upper bound of the matches (exclusions and
        phrase checks are applied to rows, not in the index), exact for plain words, and costs
        what the index scan costs: no table rows are read for it. None when the plan has no
        such scan (then the estimate stands)."""
        # no CTE: the lineage's would be planned too, with index scans of its own
        rows = self.db.read_with(
            {"enable_seqscan": "off", "enable_indexscan": "off", "jit": "off"},
            "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) SELECT 1 FROM messages AS m "
            "WHERE m.tsv @@ to_tsquery('english', :q) LIMIT 1", {"q": self.params["q"]})
        heap = _find(_plan(rows)["Plan"], "Bitmap Heap Scan")
        if heap is None or heap.get("Relation Name") != "messages":
            return None
        node = _find(heap, "Bitmap Index Scan")
        return None if node is None else int(node["Actual Rows"])

    def ranked(self, where: list[str], low: Any, high: Any, estimate: float,
               nodes: int = 1) -> list[Any]:
        """Every match ranked when there are at most ``limit``; else the matches of SLICES short
        stretches of ids, one at the end of each of SLICES equal slices of history.
        ``estimate``: the planner's estimate of the matches; ``nodes``: the query's size (1: one
        word)."""
        select = (f"SELECT m.id, -ts_rank_cd(m.tsv, to_tsquery('english', :q)) FROM messages AS m "
                  f"WHERE {' AND '.join(where)}")
        sample = min(SAMPLE, self.limit)
        # How many match: the planner's estimate (no rows read). Far within the budget, the
        # matches are read at once (LIMIT limit + 1 says whether there are more). Else, unless
        # far above the budget, the count of the index's entries decides (index_count: no rows
        # read either); it is also read when the estimate was too low, so the sample is sized
        # as a count-first search sizes it. (The planner underestimates words that come
        # together two to five times: reading past the budget first costs more than a count.)
        total = estimate
        counted = False
        first: tuple[int, list[Any]] | None = None  # a stretch width and the matches it holds
        matching: int | None = None  # the matches left after the exclusions, when counted
        if self.limit * READ_BELOW < total <= COUNT_BELOW * self.limit:
            counted = True
            one = None
            # one word: its posting list is about as long as its matches, and counting them in
            # the index costs less than visiting them (the count and the stretches' read are
            # two statements from an estimate above the budget); several words: the count
            # decodes every word's posting list, a second time when the sample is read
            one_below = ONE_READ_BELOW if nodes > 1 else 1
            if (total <= one_below * self.limit and low is not None and high is not None
                    and int(high) - int(low) + 1 >= SLICES):
                one = self._count_and_read(where, int(low), int(high), sample)
            if one is not None:
                total, matching, width, found = one
                if total <= self.limit:
                    return found
                first = (width, found)
            else:
                count = self.index_count()
                total = total if count is None else float(count)
        exact_tried = False
        if total <= self.limit or low is None or high is None:
            exact_tried = True
            found = self._read(f"{select} LIMIT :cap", cap=self.limit + 1)
            if len(found) <= self.limit or low is None or high is None:
                return found
            if not counted:  # more than the estimate said: count them
                count = self.index_count()
                total = total if count is None else float(count)
            total = max(total, float(len(found)))
        low, high = int(low), int(high)
        span = high - low + 1
        step = span // SLICES
        if step < 1:
            return self._read(f"{select} LIMIT :cap", cap=self.limit + 1)
        # a stretch holds about sample / SLICES matches at the estimated density
        width = min(step, max(1, math.ceil(span * sample / SLICES / max(total, 1.0))))
        while True:
            if first is not None and first[0] == width:
                found, first = first[1], None  # read with the count (_count_and_read)
            else:
                found = self._stretches(select, low, step, width, total, sample)
            implied = len(found) * span / (SLICES * width)
            if not exact_tried and implied <= self.limit:
                # the estimate was far too high: few enough to rank them all
                exact_tried = True
                if matching is None or matching <= self.limit:
                    exact = self._read(f"{select} LIMIT :cap", cap=self.limit + 1)
                    if len(exact) <= self.limit:
                        return exact
            if len(found) >= sample // 4 or width >= step:
                self._sampled()
                return found
            # an overestimate left the sample thin: widen the stretches (each try reads few rows)
            width = min(step, width * max(2, math.ceil(sample / max(len(found), 1))))

    def _stretches(self, select: str, low: int, step: int, width: int, total: float,
                   sample: int) -> list[Any]:
        """The matches of the SLICES stretches of ``width`` ids at the ends of the slices."""
        way = _stretch_way(SLICES * width, total)
        # "rows": dense matches, short stretches: test each row of the stretches (read
        # through the primary key) rather than read the text index's whole posting lists.
        # "filter": sparse matches, long stretches: every match the text index gives is
        # visited and its id tested (``m.id + 0`` keeps the primary key out of the plan),
        # cheaper than a bitmap of every id of the stretches. "bitmap": in between, that
        # bitmap is intersected with the text index's.
        column = "(m.id + 0)" if way == "filter" else "m.id"
        ranges = " OR ".join(
            f"{column} BETWEEN {low + (k + 1) * step - width} AND {low + (k + 1) * step - 1}"
            for k in range(SLICES))
        stretch = select.replace(_INDEXED_MATCH, _ROW_MATCH) if way == "rows" else select
        return self._read(f"{stretch} AND ({ranges}) LIMIT :cap",
                          cap=max(4 * sample, self.limit + 1))

    def _count_and_read(self, where: list[str], low: int, high: int,
                        sample: int) -> tuple[float, int, int, list[Any]] | None:
        """Count the matches and read the ones to rank in one statement: ``(matches, matches
        left after the exclusions, stretch width, ranked candidates)``. The text index's
        matches are visited once (their ids and whether the exclusions keep them); the count
        sizes the stretches as :meth:`ranked` does, and only the matches to rank (every one
        when there are at most ``limit``, else those of the stretches) are read again, by
        their row address, for the rank. None when more than ``COUNT_BELOW * limit`` match
        (the planner underestimated: then the index count and the stretches' own read are
        cheaper than visiting every match)."""

        rest = " AND ".join(w for w in where if w != _INDEXED_MATCH) or "true"
        span = high - low + 1
        step = span // SLICES
        most = COUNT_BELOW * self.limit
        cap = max(4 * sample, self.limit + 1)
        # the width as ranked() computes it (the same float operations, in the same order)
        width = (f"least({step}, greatest(1, ceil({span * sample}::float8 / {SLICES} / "
                 "greatest(c.n, 1)::float8)))::bigint")
        rows = self.db.read(
            f"{self.cte}, hits AS MATERIALIZED (SELECT m.id, m.ctid AS t, ({rest}) AS ok "
            f"FROM messages AS m WHERE {_INDEXED_MATCH} LIMIT {most + 1}), "
            "c AS (SELECT count(*) AS n, count(*) FILTER (WHERE ok) AS k FROM hits), "
            f"w AS (SELECT c.n, c.k, {width} AS width FROM c), "
            "picked AS (SELECT h.t FROM hits AS h, w WHERE h.ok AND w.n <= "
            f"{most} AND (w.n <= {self.limit} OR (h.id BETWEEN {low} AND "
            f"{low + SLICES * step - 1} AND (h.id - {low}) % {step} >= {step} - w.width)) "
            f"ORDER BY h.id LIMIT {cap}) "
            "SELECT w.n, w.k, w.width, m.id, -ts_rank_cd(m.tsv, to_tsquery('english', :q)) "
            "FROM w LEFT JOIN messages AS m ON m.ctid = ANY(ARRAY(SELECT t FROM picked))",
            self.params)
        n, k, w = int(rows[0][0]), int(rows[0][1]), int(rows[0][2])
        if n > most or w != min(step, max(1, math.ceil(span * sample / SLICES / max(n, 1.0)))):
            return None
        found = [Candidate(int(r[3]), float(r[4])) for r in rows if r[3] is not None]
        return float(n), k, w, found

    def substring(self, where: list[str], low: Any, high: Any) -> list[Any]:
        """Stopwords only: newest first in stretches spread over all history (all messages
        when the archive is small, or when the stretches hold no match)."""
        select = (f"SELECT m.id, 0.0 FROM messages AS m WHERE {' AND '.join(where)}")
        if low is not None and high is not None and int(high) - int(low) > SLICES * SLICE_ROWS:
            low, high = int(low), int(high)
            step = (high - low + 1) // SLICES
            ranges = " OR ".join(f"m.id BETWEEN {low + k * step + step - SLICE_ROWS} AND "
                                 f"{low + k * step + step - 1}" for k in range(SLICES))
            found = self._read(f"{select} AND ({ranges}) ORDER BY m.id DESC LIMIT :cap",
                               cap=self.limit)
            if found:
                self._sampled()
                return found
        return self.newest(where)

    def newest(self, where: list[str]) -> list[Any]:
        """The newest ``limit`` matches, score 0."""
        return self._read(f"SELECT m.id, 0.0 FROM messages AS m WHERE {' AND '.join(where)} "
                          "ORDER BY m.id DESC LIMIT :cap", cap=self.limit)


def _stretch_way(rows: int, total: float) -> str:
    """How the stretches' matches are read, the cheapest of (estimated from ``rows``, the ids in
    the stretches, and ``total``, the query's matches): "rows", testing each row of the
    stretches; "bitmap", the text index's matches intersected with a bitmap of the stretches'
    ids; "filter", every match of the text index visited and its id tested."""
    costs = {"rows": rows * ROW_US,
             "bitmap": total * POSTING_US + rows * ID_US + SAMPLE * PAGE_US,
             "filter": total * (POSTING_US + VISIT_US) + SAMPLE * PAGE_US}
    return min(costs, key=lambda way: costs[way])


def indexes_word(archive: Any, term: str) -> bool:
    """Whether the text index holds ``term`` (a quoted FTS5 term, as query.py quotes it) for some
    message: the PostgreSQL side of search.py's prefix expansion."""
    return bool(archive.db.read(
        "SELECT 1 FROM messages AS m WHERE m.tsv @@ to_tsquery('english', :q) LIMIT 1",
        {"q": tsquery_text(term)}))


def _plan(rows: list[Any]) -> Any:
    plan = rows[0][0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return plan[0]


def _find(node: Any, kind: str) -> Any:
    """The first plan node of type ``kind`` (depth first), or None."""
    if node.get("Node Type") == kind:
        return node
    for child in node.get("Plans", ()):
        found = _find(child, kind)
        if found is not None:
            return found
    return None


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
