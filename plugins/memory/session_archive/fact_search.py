"""Searching derived facts beside the messages (``session_search``'s ``facts``).

Facts are few (a handful per conversation), so a search reads the facts in scope (the user's,
with memory.scope: user; never the current conversation's) and scores each in memory: the share
of the query's words its text and topic hold (a word counts when one starts with the other's
first five letters, a crude stem) and, when an embedder is active and the fact has a vector of
its dimension, the cosine of the two. A fact scores ``cosine + 0.5 x word share`` and is shown
when it shares a word or its cosine reaches :data:`MIN_COSINE`. Each hit names its source
session (to open with ``session_id``) and, when superseded, the fact that replaced it, beside
it: the list is not reordered by validity.
"""

from __future__ import annotations

import re
from typing import Any

from hermes_core.storage import vectors as stored_vectors

from .facts import FACT_COLUMNS, Fact, _day, _with_sources
from .store import LINEAGE_CTE, SessionArchive

__all__ = ["MIN_COSINE", "search_facts"]

MIN_COSINE = 0.45
_WORD = re.compile(r"\w+")
_STOP = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from",
    "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "is", "it", "its", "me",
    "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "they", "this",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "will", "with",
    "you", "your", "about", "any", "can", "could", "would", "should",
))


def _words(text: str) -> set[str]:
    return {w[:5] for w in _WORD.findall(text.casefold()) if w not in _STOP and len(w) > 1}


def search_facts(archive: SessionArchive, query: str, *, user: str | None,
                 current_session_id: str | None = None, embedder: Any = None,
                 limit: int = 5) -> list[dict[str, Any]]:
    """The best ``limit`` facts for ``query`` as plain data (see the module doc)."""
    wanted = _words(query)
    params: dict[str, Any] = {}
    where = ""
    prefix = ""
    if user is not None:
        where += " AND coalesce(f.user_id, '') = :user"
        params["user"] = user
    if current_session_id:
        prefix = LINEAGE_CTE
        where += " AND f.session NOT IN (SELECT num FROM lineage)"
        params["sid"] = current_session_id
    rows = archive.db.read(f"{prefix} SELECT {FACT_COLUMNS}, f.vec FROM facts AS f JOIN sessions "
                           f"AS s ON s.num = f.session WHERE 1 = 1{where}", params)
    if not rows:
        return []
    cosines: dict[int, float] = {}
    if embedder is not None and query.strip():
        cosines = _cosines(embedder, query, [(int(r[0]), r[11]) for r in rows if r[11]])
    scored: list[tuple[float, Fact]] = []
    for row in rows:
        fact = Fact.from_row(row[:11])
        share = len(wanted & _words(f"{fact.text} {fact.topic}")) / len(wanted) if wanted else 0.0
        cosine = cosines.get(fact.id, 0.0)
        if share > 0 or cosine >= MIN_COSINE:
            scored.append((cosine + 0.5 * share, fact))
    scored.sort(key=lambda x: (-x[0], -x[1].id))
    hits = _with_sources(archive, [f for _s, f in scored[:limit]])
    newer = _newer(archive, [f.superseded_by for f in hits if f.superseded_by is not None])
    out = []
    for fact in hits:
        item = fact.to_dict()
        item.pop("user", None)
        if fact.superseded_by in newer:
            item["superseded_by"] = newer[fact.superseded_by]
        out.append(item)
    return out


def _newer(archive: SessionArchive, ids: list[int]) -> dict[int, dict[str, Any]]:
    rows = archive.read_in("SELECT f.id, f.text, f.valid_from, s.id FROM facts AS f JOIN "
                           "sessions AS s ON s.num = f.session WHERE f.id IN ({marks})", ids)
    return {int(r[0]): {"fact_id": int(r[0]), "fact": r[1], "valid_from": _day(r[2]),
                        "session_id": r[3]} for r in rows}


def _cosines(embedder: Any, query: str, vecs: list[tuple[int, bytes]]) -> dict[int, float]:
    try:
        q = [float(x) for x in embedder.embed([query])[0]]
    except Exception:
        return {}  # words still find facts
    # a fact made by another embedder (another size) is found by words until re-derived
    return stored_vectors.cosines(q, vecs, len(q))
