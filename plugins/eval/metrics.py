"""Scoring retrieved items against a question's evidence: recall@k, hit@k, NDCG@k.

**Evidence units.** LongMemEval: each answer session (``answer_session_ids``). LoCoMo: each evidence
dialogue turn (``evidence``, e.g. ``D1:3``).

**When an item covers a unit**: by identity wherever the item carries one, by text only where
it does not.

1. *by identity*: an item that names a session (a tool result's ``session_id``) covers exactly the
   units of the haystack session the harness stored under that id (LongMemEval: that session;
   LoCoMo: every evidence turn of that session — session-level retrieval, as LoCoMo's own
   evaluation scores it). Its text is not consulted: an item from another session never covers a
   unit, however much text the two share (templated or repeated sentences would otherwise be
   credited to the wrong session), and an item naming a session the harness did not store (the
   question's own) covers nothing.
2. *by text* (the fallback, for items without a session id: a prompt block's or a prefetch's
   lines): the item's text contains the unit's evidence text. The evidence text of a LongMemEval
   session is its turns marked ``has_answer`` (all its user turns when none is marked); of a LoCoMo
   unit, the turn itself. Text is compared after normalising (lower case, every run of characters
   other than letters and digits becomes one space); a turn is contained when any 8 consecutive
   words of it appear consecutively in the item, or, for a turn shorter than 8 words, when all of
   it does. A snippet or a window that cuts a long turn still counts; a lone common word never does.

Each score says how many of the units it found were credited by text (``by_text``), so a report
can say how much of a figure rests on the fallback.

**Metrics at k** over the ranked items ``1..k`` (a unit counts once, at the first item covering it):

* ``recall@k`` = units covered by the first k items / all units;
* ``hit@k`` = 1 if at least one unit is covered by the first k items, else 0;
* ``ndcg@k`` = DCG / IDCG with binary gains: item *i* gains 1 when it covers a unit no earlier item
  covered, DCG = Σ gain_i / log2(i + 1), IDCG = the same for a perfect ranking
  (min(k, units) gains at ranks 1, 2, ...).

**The whole stack** (the question's headline scores): rank *r* is the *r*-th item of every source,
so recall@k is the share of units some source found in its first k items (see :func:`score_stack`).

A question without evidence (an abstention question, or LoCoMo entries with no ``evidence``) gets
no retrieval scores and is left out of the averages (counted as ``no_evidence``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .datasets import Case, Question
from .retrieve import Item

__all__ = ["SHINGLE", "Evidence", "contains_turn", "evidence_for", "normalise", "score_ranking",
           "score_stack"]

#: consecutive words of an evidence turn an item must hold to count as containing it
SHINGLE = 8
_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalise(text: str) -> list[str]:
    return _NON_WORD.sub(" ", text.lower()).split()


def _shingles(words: list[str]) -> set[tuple[str, ...]]:
    if len(words) < SHINGLE:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


@dataclass
class Evidence:
    """One unit: its label, the dataset session holding it, and its text shingles."""

    unit: str
    session: str
    shingles: list[set[tuple[str, ...]]]


def evidence_for(question: Question, case: Case) -> list[Evidence]:
    sessions = {s.id: s for s in case.sessions}
    out = []
    if question.evidence_turns:
        turns = {t.turn_id: (s.id, t) for s in case.sessions for t in s.turns if t.turn_id}
        for dia in question.evidence_turns:
            sid, turn = turns[dia]
            out.append(Evidence(dia, sid, [_shingles(normalise(turn.content))]))
        return out
    for sid in question.evidence_sessions:
        session = sessions.get(sid)
        if session is None:
            continue
        marked = [t for t in session.turns if t.has_answer] or [t for t in session.turns
                                                                 if t.role == "user"]
        out.append(Evidence(sid, sid, [s for t in marked if (s := _shingles(normalise(t.content)))]))
    return out


def contains_turn(item_words: list[str], shingles: set[tuple[str, ...]]) -> bool:
    if not shingles:
        return False
    size = len(next(iter(shingles)))
    return any(tuple(item_words[i:i + size]) in shingles for i in range(len(item_words) - size + 1))


def covered_units(item: Item, evidence: Sequence[Evidence], session_map: dict[str, str]) -> set[str]:
    """The units ``item`` covers (see the module docstring)."""
    if item.session_id:
        mapped = session_map.get(item.session_id)
        return {ev.unit for ev in evidence if mapped is not None and mapped == ev.session}
    words = normalise(item.text)
    return {ev.unit for ev in evidence if any(contains_turn(words, s) for s in ev.shingles)}


def score_ranking(items: Sequence[Item], evidence: Sequence[Evidence], session_map: dict[str, str],
                  ks: Sequence[int]) -> dict[str, object]:
    """recall@k, hit@k and ndcg@k for each k, and where each unit was first found (1-based)."""
    units = [ev.unit for ev in evidence]
    first: dict[str, int] = {}
    by_text: set[str] = set()
    gains: list[int] = []
    for rank, item in enumerate(items, start=1):
        new = covered_units(item, evidence, session_map) - set(first)
        for unit in new:
            first[unit] = rank
        if not item.session_id:
            by_text |= new
        gains.append(1 if new else 0)
    return _scores(units, first, by_text, gains, ks, lambda k: [1] * min(k, len(units)))


def score_stack(rankings: Sequence[Sequence[Item]], evidence: Sequence[Evidence],
                session_map: dict[str, str], ks: Sequence[int]) -> dict[str, object]:
    """The whole stack's scores: rank *r* of the stack is the *r*-th item of every source.

    recall@k and hit@k count the units covered by the first k items of any source. NDCG@k grades
    each rank by the new units found there (possibly several, from several sources) against the
    ideal for as many sources: every rank holding as many new units as there are sources, until
    all are found. With one source, recall@k and hit@k are :func:`score_ranking`'s; NDCG@k is too
    unless one item covers several new units (a session-level item holding two evidence turns):
    here each new unit is a gain, there the rank counts once.
    """
    units = [ev.unit for ev in evidence]
    width = max(1, sum(1 for r in rankings if r))
    first, by_text, gains = _stack_gains(rankings, evidence, session_map)
    return _scores(units, first, by_text, gains, ks,
                   lambda k: _ideal_gains(len(units), width, k))


def _scores(units: list[str], first: dict[str, int], by_text: set[str], gains: list[int],
            ks: Sequence[int], ideal: Callable[[int], list[int]]) -> dict[str, object]:
    """recall@k, hit@k and ndcg@k (against the ``ideal(k)`` gains) for each k, from the rank
    each unit was first found at and the gain of each rank."""
    out: dict[str, object] = {"found_at": {u: first.get(u) for u in units},
                              "by_text": sorted(by_text)}
    for k in ks:
        found = sum(1 for u in units if first.get(u, k + 1) <= k)
        dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal(k)))
        out[f"recall@{k}"] = found / len(units) if units else None
        out[f"hit@{k}"] = (1.0 if found else 0.0) if units else None
        out[f"ndcg@{k}"] = (dcg / idcg if idcg else 0.0) if units else None
    return out


def _stack_gains(rankings: Sequence[Sequence[Item]], evidence: Sequence[Evidence],
                 session_map: dict[str, str]) -> tuple[dict[str, int], set[str], list[int]]:
    """Walk the stack rank by rank: the rank each unit is first found at, the units found only
    by text (no item of that rank with a session id covered them), and the new units per rank."""
    depth = max((len(r) for r in rankings), default=0)
    first: dict[str, int] = {}
    by_text: set[str] = set()
    gains: list[int] = []
    for rank in range(1, depth + 1):
        new: set[str] = set()
        by_identity: set[str] = set()
        for ranking in rankings:
            if rank <= len(ranking):
                item = ranking[rank - 1]
                covered = covered_units(item, evidence, session_map) - set(first)
                new |= covered
                if item.session_id:
                    by_identity |= covered
        for unit in new:
            first[unit] = rank
        by_text |= new - by_identity
        gains.append(len(new))
    return first, by_text, gains


def _ideal_gains(units: int, width: int, k: int) -> list[int]:
    """The best first k ranks: ``width`` new units each until all ``units`` are found."""
    ideal: list[int] = []
    left = units
    while left > 0 and len(ideal) < k:
        ideal.append(min(width, left))
        left -= ideal[-1]
    return ideal


def tokens(text: str) -> int:
    """The kernel's estimate: 4 characters per token, rounded up."""
    return (len(text) + 3) // 4
