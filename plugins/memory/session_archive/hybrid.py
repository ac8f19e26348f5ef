"""Hybrid ranking: BM25 and vector similarity fused into one score per message.

Reciprocal-rank fusion was measured worse than vectors alone on paraphrased questions: it gives a
message ranked 1st by words as much weight as one ranked 1st by meaning, however weak the word
match (a plain-language question's any-word fallback ranks *something* first). Scores carry that
information and ranks do not, so the fusion is a weighted sum of comparable scores:

* meaning: the cosine similarity of the query and the message (all-MiniLM-L6-v2: ~0.2 for
  unrelated text, 0.5+ for a paraphrase), computed for every candidate that has a vector, not
  only for the nearest ones;
* words: BM25 divided by the best BM25 of the query (so 1.0 is the best word match), weighted
  :attr:`Weights.words`; when every word of the query matched (not the any-word fallback), an
  extra :attr:`Weights.exact` so an exact-word match still wins;
* a message with no vector (a tool output) has its meaning estimated from its word score;
* recency: up to :attr:`Weights.recency` for the newest candidate, proportionally less for
  older ones, so the later statement of a changed fact outranks the outdated one when both
  match about equally.

Candidates are the lexical matches (as ranked by search.py) and the :attr:`Weights.neighbours`
nearest vectors, after the same exclusions (lineage, roles). Each result records which path
found it (``words``, ``meaning`` or both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hermes_core.embeddings import EmbeddingError, GuardedEmbedder

from .errors import QueryError
from .query import SearchPlan
from .search import Candidate, plan_query, run_plan
from .store import SessionArchive
from .vectors import VectorIndex, lineage_ids, role_filter, state

__all__ = ["HybridResult", "Weights", "hybrid_candidates"]


@dataclass(frozen=True)
class Weights:
    words: float = 0.25
    #: the word weight when no message had every word (the any-word fallback: weak evidence)
    any_words: float = 0.0
    exact: float = 0.15
    recency: float = 0.06
    #: nearest vectors taken as candidates
    neighbours: int = 100
    #: lexical candidates considered for fusion (best first)
    lexical: int = 300
    #: similarity below which a vector-only candidate is dropped (unrelated text)
    floor: float = 0.25
    #: supersession: a later message this similar to an earlier candidate (the same topic) ...
    same_topic: float = 0.45
    #: ... and scoring at most this much below it is taken for an update and ranked above it
    update_margin: float = 0.15
    #: candidates checked for supersession
    update_window: int = 20


@dataclass
class HybridResult:
    found: list[Candidate]
    #: how the lexical part matched ("all", "words", "any", "expression", "none")
    matched: str
    #: message id -> "words", "meaning" or "words+meaning"
    via: dict[int, str]
    #: what semantic search lacked for this query (None: it took part)
    problem: str | None
    plan: SearchPlan
    broad: bool


def hybrid_candidates(
    archive: SessionArchive, query: str, embedder: GuardedEmbedder | None,
    index: VectorIndex | None, *, exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None, limit: int = 2000, weights: Weights | None = None,
    use_words: bool = True,
) -> HybridResult:
    """Fused candidates for ``query``; lexical only (with a reason) when vectors cannot help.

    Raises QueryError only when neither path can run (a query with nothing to search for and no
    embedder).
    """
    w = weights or Weights()
    lexical: list[Candidate] = []
    matched = "none"
    broad: list[bool] = []
    query_error: QueryError | None = None
    try:
        plan = plan_query(archive, query)
        if use_words:
            lexical, matched = run_plan(archive, plan, exclude_lineage_of=exclude_lineage_of,
                                        roles=roles, limit=limit, broad=broad)
    except QueryError as exc:
        query_error = exc
        plan = SearchPlan(text=query)
    problem: str | None = None
    vec: dict[int, float] = {}
    nearest_ids: set[int] = set()
    qv = None
    if embedder is None or index is None:
        problem = "semantic search is off"
    else:
        st = state(archive, embedder, count=False)  # no table scan per query
        if st.problem:
            problem = st.problem
        else:
            try:
                qv = np.asarray(embedder.embed([query[:4000]]), dtype=np.float32)[0]
            except EmbeddingError as exc:
                problem = str(exc)
    if qv is not None and index is not None and embedder is not None:
        index.refresh(embedder.dimension)
        exclude = lineage_ids(archive, exclude_lineage_of) if exclude_lineage_of else None
        near = [(i, s) for i, s in index.nearest(qv, w.neighbours, exclude) if s >= w.floor]
        if roles:
            keep = role_filter(archive, [i for i, _ in near], roles)
            near = [(i, s) for i, s in near if i in keep]
        vec = dict(near)
        nearest_ids = set(vec)
        # every lexical candidate's own similarity, not only the nearest ones'
        lex_ids = [c.id for c in lexical[: w.lexical] if c.id not in vec]
        if lex_ids:
            vec.update(_similarities(index, qv, lex_ids))
    if qv is None:
        if query_error is not None:
            raise query_error
        return HybridResult(lexical, matched, {c.id: "words" for c in lexical[:50]}, problem,
                            plan, bool(broad))
    lex = {c.id: -c.score for c in lexical[: w.lexical]}
    best = max(lex.values(), default=0.0)
    exact = matched in ("all", "expression")
    ids = list(dict.fromkeys([*lex, *vec]))
    stamps = _timestamps(archive, ids)
    t_lo = min(stamps.values(), default=0.0)
    t_span = (max(stamps.values(), default=0.0) - t_lo) or 1.0
    fused: list[tuple[float, int]] = []
    via: dict[int, str] = {}
    for i in ids:
        words = lex.get(i, 0.0) / best if best > 0 else 0.0
        meaning = vec.get(i)
        if meaning is None:
            meaning = 0.2 + 0.4 * words  # no vector (a tool output): trust its words
        score = meaning + (w.words if matched != "any" else w.any_words) * words
        score += w.exact * words if exact and i in lex else 0.0
        score += w.recency * (stamps.get(i, t_lo) - t_lo) / t_span
        fused.append((score, i))
        via[i] = "+".join(p for p, ok in (("words", i in lex), ("meaning", i in nearest_ids))
                          if ok)
    fused.sort(key=lambda x: (-x[0], -x[1]))
    if index is not None:
        fused = _supersede(fused, index, stamps, w)
    found = [Candidate(i, -s) for s, i in fused]
    return HybridResult(found, matched if lexical else "meaning", via, problem, plan, bool(broad))


def _supersede(fused: list[tuple[float, int]], index: VectorIndex, stamps: dict[int, float],
               w: Weights) -> list[tuple[float, int]]:
    """A later message on the same topic as a better-ranked earlier one, and nearly as relevant,
    is taken for an update of it and moved just above it (knowledge updates: the current
    statement of a fact outranks the outdated one)."""
    head = fused[: w.update_window]
    pos = np.searchsorted(index.ids, [i for _, i in head])
    rows = {i: index.matrix[p] for (_, i), p in zip(head, pos, strict=True)
            if p < len(index.ids) and index.ids[p] == i}
    scores = dict((i, s) for s, i in head)
    for a in range(len(head)):
        for b in range(a + 1, len(head)):
            ia, ib = head[a][1], head[b][1]
            if ia not in rows or ib not in rows or stamps.get(ib, 0) <= stamps.get(ia, 0):
                continue
            if scores[ib] < scores[ia] - w.update_margin or scores[ib] > scores[ia]:
                continue
            if float(rows[ia] @ rows[ib]) >= w.same_topic:
                scores[ib] = scores[ia] + 1e-3
    head = sorted(((scores[i], i) for _, i in head), key=lambda x: (-x[0], -x[1]))
    return head + fused[w.update_window:]


def _similarities(index: VectorIndex, qv: Any, ids: list[int]) -> dict[int, float]:
    pos = np.searchsorted(index.ids, ids)
    out: dict[int, float] = {}
    for i, p in zip(ids, pos, strict=True):
        if p < len(index.ids) and index.ids[p] == i:
            out[i] = float(index.matrix[p] @ qv)
    return out


def _timestamps(archive: SessionArchive, ids: list[int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for k in range(0, len(ids), 900):
        part = ids[k:k + 900]
        out.update({r[0]: float(r[1]) for r in archive.db.read(
            f"SELECT id, timestamp FROM messages WHERE id IN ({','.join('?' * len(part))})",
            tuple(part))})
    return out
