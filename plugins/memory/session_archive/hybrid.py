"""Hybrid ranking: BM25 and vector similarity fused into one score per message, then per
conversation.

Reciprocal-rank fusion was measured worse than vectors alone on paraphrased questions: it gives a
message ranked 1st by words as much weight as one ranked 1st by meaning, however weak the word
match (a plain-language question's any-word fallback ranks *something* first). Scores carry that
information and ranks do not, so the fusion is a weighted sum of comparable scores: the kernel's
:func:`hermes_core.semantic.fuse`, the one fusion every store with vectors uses. The archive's own
part is its ranking policy (:class:`Policy`): the word weight, which candidates are read, how a
conversation is scored, and when a later conversation is named as an update.

Per message:

* meaning: the cosine similarity of the query and the message (all-MiniLM-L6-v2: ~0.1-0.2 for
  unrelated text, 0.4+ for a paraphrase), computed for every candidate that has a vector, not
  only for the nearest ones;
* words: BM25 divided by the best BM25 of the query (so 1.0 is the best word match), weighted
  :attr:`Policy.words`, and only when some message holds every word of the query: the any-word
  fallback of a plain-language question ranks *something* first however weak the match, and
  counting it cost paraphrases on two of the three development folds (a weight of 0.05 or 0.1 traded
  0.03-0.07 of paraphrases for 0.07 of one fold's preferences);
* a message with no vector (a tool output) has its meaning estimated from its word score;
* word share: the message's share of the question's words, each weighted by its rarity in the
  archive (IDF; :mod:`.word_share`), added to its meaning, weighted :attr:`Policy.share`, when it
  is at least :attr:`Policy.share_floor`. A message holding most of the question's rare words is
  evidence whatever its vector; a distractor holding one common word of the question stays below
  the floor and gains nothing (below it, the share cost paraphrases whose evidence shares no
  word with the question). Unlike the BM25 term it counts whichever try matched.

There is no recency prior: a newer message is not more likely to answer a question, and a prior
strong enough to order an update above the outdated statement lifts every recent distractor
too (measured: it cost paraphrase and preference questions more than it won). Time counts only
between two conversations on the same topic (below).

Per conversation (what ``session_search`` returns): a fact is often spread over a few turns
("Do you have regular one-to-ones with her?" / "Every other Thursday at four."), and no single
message of it is close to a reworded question. A conversation's score is its best message's
plus :attr:`Policy.support` times the next :attr:`Policy.support_count` messages' excess over
the similarity of unrelated text (:attr:`Policy.floor`): several relevant turns beat one
incidental match. Messages are returned grouped by conversation, best conversation first.

Knowledge updates (:func:`_updates`): the ranking is never reordered by a guess that a fact
changed (measured on three development sets written independently, moving a presumed update
above what it supersedes cost exact-word questions 0.19-0.23 of hit@3 and paraphrase and
preference questions up to 0.07, for 0.04-0.07 on updates). Instead a later conversation B that
looks like an update of a listed conversation A is named beside A (``HybridResult.newer``; the
search tool shows it as A's ``newer``), so the reader sees both and decides. B is taken for an
update of a better-ranked A when all of these hold:

* topic: some message of A and some message of B have a cosine of at least
  :attr:`Policy.same_topic` (their best matches alone miss updates worded differently);
* time: B is at least :attr:`Policy.update_days` later than A (the same week's neighbouring
  conversation is not a change of the fact);
* relevance: B's best message is at least :attr:`Policy.update_relevance` times as similar to
  the question as A's (B answers the question too). There is no margin on the fused scores: an
  outdated statement that repeats the question's words would otherwise always keep its place;
* B says that something changed (:data:`CHANGE`: "now", "instead", "gave up", "back to",
  "switched", ...), as an update does and a neighbouring conversation on the topic does not;
  or a statement of the user's in B names something A's user messages named and gives a value
  they did not (:func:`values`: figures, number words, names; "took Shirley, so we're down to
  two birds" after "three hens, named Dolly, Shirley and Bassey"): an update that uses no change
  word. New values about nothing A named are another subject, not a change;
* the question asks about the present state of something (:func:`asks_current`: a
  present-tense question, "which editor do I use?", with no past-tense or earlier-state word,
  "what did they first say?"). A question about an event, a request ("suggest a book") or a
  keyword query is answered by whatever says it best, and a later conversation on the same
  topic (the vet visit after the adoption) must not push the answer down.

Candidates are the lexical matches (as ranked by search.py) and the :attr:`Policy.neighbours`
nearest vectors (vector_index.py: an exhaustive sign-bit scan, rescored with the stored floats), after
the same exclusions (lineage, roles). Each result records which path found it (``words``,
``meaning`` or both).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hermes_core import semantic
from hermes_core.embeddings import EmbeddingError, GuardedEmbedder

from .errors import ExclusionOnlyQuery, QueryError
from .query import SearchPlan, negated_expr
from .records import Candidate
from .search import allowed_ids, matching_ids, plan_query, run_plan
from .store import SessionArchive
from .vector_index import VectorIndex, kept_pool
from .vectors import (
    lineage_ids,
    state,
)
from .word_share import word_shares

__all__ = ["USER_WIDEN", "HybridResult", "Policy", "allowed_ids", "asks_current",
           "hybrid_candidates", "matching_ids", "states_change", "values"]

#: with memory.scope: user, how many times more neighbours are scanned before other users'
#: messages are dropped
USER_WIDEN = 8


@dataclass(frozen=True)
class Policy:
    """The archive's ranking policy: the fusion's word weight, the candidates, a conversation's
    score and the update rules (the module docstring says what each does)."""

    #: the weight of the word score (BM25 / the query's best BM25), when every word matched
    words: float = 0.2
    #: nearest vectors taken as candidates
    neighbours: int = 100
    #: lexical candidates considered for fusion (best first)
    lexical: int = 300
    #: fused candidates kept (by score) for the conversation ranking
    fused: int = 200
    #: similarity of unrelated text: a vector-only candidate below it is dropped
    floor: float = 0.15
    #: a conversation's score: its best message's, plus this times the excess over ``floor`` ...
    support: float = 0.5
    #: ... of its next best messages, this many
    support_count: int = 3
    #: a message's meaning score gains this times its IDF-weighted share of the question's
    #: words (word_share.py; 0: off) ...
    share: float = 1.0
    #: ... when that share is at least this (a distractor holding one common word stays below)
    share_floor: float = 0.3
    #: updates: two conversations are on the same topic when some message of one and some
    #: message of the other have at least this cosine ...
    same_topic: float = 0.35
    #: ... the later one was at least this many days after the earlier (sooner, it is the same
    #: episode, or a neighbouring one, not a change of the fact) ...
    update_days: float = 7.0
    #: ... and its best message is at least this share of the earlier one's similarity to the
    #: question (it answers the question too, not only shares the topic)
    update_relevance: float = 0.45
    #: ... and it says that something changed in so many words (:data:`CHANGE`; False: this
    #: path is off) ...
    change_word: bool = True
    #: ... or (when True) a statement of it names something the earlier conversation named and
    #: gives a value it did not (numbers, names: "took Shirley, so we're down to two birds"
    #: after "three hens, named Dolly, Shirley and Bassey"); a question states nothing
    differs: bool = True
    #: conversations checked for supersession
    update_window: int = 10
    #: messages per conversation compared for the topic
    topic_messages: int = 4


def __getattr__(name: str) -> Any:
    # the archive's ranking policy was called Weights until 0.2; the old name works for a release
    if name != "Weights":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    warnings.warn("session_archive.hybrid.Weights is renamed Policy (the archive's ranking "
                  "policy); import Policy instead", DeprecationWarning, stacklevel=2)
    return Policy


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
    #: conversation (chain) -> (a later conversation that looks like an update of it, that
    #: conversation's best message id); only for questions about the present state
    newer: dict[int, tuple[int, int]] = field(default_factory=dict)


def hybrid_candidates(
    archive: SessionArchive, query: str, embedder: GuardedEmbedder | None,
    index: VectorIndex | None, *, exclude_lineage_of: str | None = None,
    roles: tuple[str, ...] | None = None, limit: int = 2000, weights: Policy | None = None,
    use_words: bool = True, user: str | None = None,
) -> HybridResult:
    """Fused candidates for ``query``, grouped by conversation (best first); lexical only (with
    a reason) when vectors cannot help.

    With ``user`` (memory.scope: user) both paths see only that user's sessions: the word search
    is scoped in SQL; the one vector index of the archive is scanned for :data:`USER_WIDEN` times
    as many neighbours, and those of other users' sessions are dropped before fusion (a user
    whose messages are a tiny share of the archive may so get fewer neighbours than
    :attr:`Policy.neighbours`; the word path is unaffected).

    Raises QueryError only when neither path can run (a query with nothing to search for and no
    embedder).
    """
    w = weights or Policy()
    problem, waiting = _start_embedding(archive, query, embedder, index)
    vector_side: _VectorSide | None = None
    words_done = threading.Event()
    if waiting is not None and index is not None and embedder is not None:
        # ... and the vectors are scanned on a thread of their own as soon as it is embedded
        exclude = lineage_ids(archive, exclude_lineage_of) if exclude_lineage_of else None
        k = w.neighbours * (USER_WIDEN if user is not None else 1)
        vector_side = _VectorSide(waiting, index, embedder.dimension, k, exclude, words_done)
    # with vectors, only the best Policy.lexical word matches take part in the fusion
    want = w.lexical if vector_side is not None and w.lexical < limit else None
    try:
        words = _Words.search(archive, query, use_words, exclude_lineage_of=exclude_lineage_of,
                              roles=roles, limit=limit, user=user, want=want)
    finally:
        words_done.set()
    qv = None
    near: list[tuple[int, float]] = []
    if vector_side is not None:
        qv, near, problem = _vector_result(vector_side, problem)
    if isinstance(words.error, ExclusionOnlyQuery):  # "-dogs" does not mean dogs
        raise words.error
    if qv is None or index is None or embedder is None:
        if want is not None and words.error is None:  # the words are the whole result after all
            words = _Words.search(archive, query, use_words, exclude_lineage_of=exclude_lineage_of,
                                  roles=roles, limit=limit, user=user)
        return words.alone(problem)
    near = _allowed_near(archive, near, words, w, roles=roles, user=user)
    vec = dict(near)
    nearest_ids = set(vec)
    # every lexical candidate's own similarity, not only the nearest ones'
    lex_ids = [c.id for c in words.found[: w.lexical] if c.id not in vec]
    if lex_ids:
        vec.update(index.similarities(qv, lex_ids))
    fused, via, stamps = _fuse(archive, words.found, words.matched, vec, nearest_ids, w, query)
    found, newer = _by_conversation(archive, fused, vec, stamps, index, w, asks_current(query))
    return HybridResult(found, words.matched if words.found else "meaning", via, problem,
                        words.plan, newer)


def _start_embedding(archive: SessionArchive, query: str, embedder: GuardedEmbedder | None,
                     index: VectorIndex | None) -> tuple[str | None, Any]:
    """(why semantic search cannot help, or None; the pending embedding of ``query``, or
    None): the query is embedded on the embedder's thread while words are searched."""
    if embedder is None or index is None:
        return "semantic search is off", None
    st = state(archive, embedder, count=False)  # no table scan per query
    if st.problem:
        return st.problem, None
    try:
        return None, embedder.start([query[:4000]])
    except EmbeddingError as exc:
        return str(exc), None


def _vector_result(vector_side: _VectorSide, problem: str | None,
                   ) -> tuple[Any, list[tuple[int, float]], str | None]:
    """The query's vector (None when it failed), its nearest vectors, and the problem to
    report (``problem`` unless the vector side had one)."""
    try:
        qv, near, loading = vector_side.result()
    except EmbeddingError as exc:
        return None, [], str(exc)
    if loading:
        problem = (f"the vector index is still loading ({loading:,} vectors so far): "
                   "older messages are found by words only until it is done")
    return qv, near, problem


@dataclass
class _Words:
    """The word half of a query: its plan, candidates and which try matched, or the
    QueryError that stopped it."""

    plan: SearchPlan
    found: list[Candidate] = field(default_factory=list)
    matched: str = "none"
    error: QueryError | None = None

    @classmethod
    def search(cls, archive: SessionArchive, query: str, use_words: bool, *,
               exclude_lineage_of: str | None, roles: tuple[str, ...] | None, limit: int,
               user: str | None, want: int | None = None) -> _Words:
        """``want``: only the best ``want`` are needed (:func:`~.search.run_plan`)."""
        try:
            words = cls(plan_query(archive, query))
            if use_words:
                words.found, words.matched = run_plan(
                    archive, words.plan, exclude_lineage_of=exclude_lineage_of, roles=roles,
                    limit=limit, user=user, want=want)
        except QueryError as exc:
            return cls(SearchPlan(text=query), error=exc)
        return words

    def alone(self, problem: str | None) -> HybridResult:
        """The result by words only (meaning could not take part because of ``problem``);
        the query's error when words could not search it either."""
        if self.error is not None:
            if problem:  # say why meaning, which could have searched it, did not
                raise QueryError(f"{self.error} (it could be searched by meaning, but "
                                 f"{problem})") from None
            raise self.error
        return HybridResult(self.found, self.matched, {c.id: "words" for c in self.found[:50]},
                            problem, self.plan)


def _allowed_near(archive: SessionArchive, near: list[tuple[int, float]], words: _Words,
                  w: Policy, *, roles: tuple[str, ...] | None, user: str | None,
                  ) -> list[tuple[int, float]]:
    """The nearest vectors above the floor that the search may return: of ``roles`` and
    ``user`` (the best :attr:`Policy.neighbours`), and not matching what the query excludes."""
    near = [(i, s) for i, s in near if s >= w.floor]
    if user is not None or roles:
        keep = allowed_ids(archive, [i for i, _ in near], roles=roles, user=user)
        near = [(i, s) for i, s in near if i in keep][: w.neighbours]
    negated = negated_expr(words.plan)
    if negated and near:  # -word and NOT hold for what meaning finds too
        lexical_ids = {c.id for c in words.found}
        out = matching_ids(archive, negated, [i for i, _ in near if i not in lexical_ids])
        near = [(i, s) for i, s in near if i not in out]
    return near


#: threads kept for the vector halves of queries running at once (more queue: each half is
#: bounded by the embedding's deadline and a finite scan)
QUERY_THREADS = 4


class _VectorSide:
    """The vector half of a query on a kept thread: refresh the index (read the vectors
    stored since, by this node or another; without waiting for a first load in progress),
    wait for the query's embedding, find the nearest vectors."""

    def __init__(self, waiting: Any, index: VectorIndex, dimension: int, k: int,
                 exclude: set[int] | None, words_done: threading.Event) -> None:
        self._out: tuple[Any, list[tuple[int, float]], int] | None = None
        self._error: EmbeddingError | None = None
        pool = kept_pool("archive-vector-query", QUERY_THREADS)
        self._done = pool.submit(self._run, waiting, index, dimension, k, exclude, words_done)

    def _run(self, waiting: Any, index: VectorIndex, dimension: int, k: int,
             exclude: set[int] | None, words_done: threading.Event) -> None:
        try:
            # what other nodes (or the indexer) stored since the last query is read while the
            # query is being embedded, not after
            loading = 0
            if not index.refresh(dimension, wait=False) and not index.complete:
                loading = len(index)
            qv = np.asarray(waiting(), dtype=np.float32)[0]
            # the scan takes both cores only once the word search is done; before, one (two
            # scan threads beside the word search slow it down more than they gain)
            threads = 2 if words_done.is_set() else 1
            self._out = (qv, index.nearest(qv, k, exclude, threads=threads), loading)
        except EmbeddingError as exc:
            self._error = exc
        except Exception as exc:  # a closed archive, a bug: word search goes on
            self._error = EmbeddingError(f"semantic search failed: {type(exc).__name__}: {exc}")

    def result(self) -> tuple[Any, list[tuple[int, float]], int]:
        self._done.result()  # bounded: the embedding has its deadline, the scan is finite
        if self._error is not None:
            raise self._error
        assert self._out is not None
        return self._out


def _fuse(archive: SessionArchive, lexical: list[Candidate], matched: str,
          vec: dict[int, float], nearest_ids: set[int], w: Policy, query: str = "",
          ) -> tuple[list[Candidate], dict[int, str], dict[int, float]]:
    """Each candidate's fused score (as a Candidate, lower is better), the path that found it,
    and its timestamp."""
    lex = {c.id: -c.score for c in lexical[: w.lexical]}
    best = max(lex.values(), default=0.0)
    ids = list(dict.fromkeys([*lex, *vec]))
    words = [lex.get(i, 0.0) / best if best > 0 else 0.0 for i in ids]
    # a message without a vector (a tool output) has its meaning estimated from its words
    meaning = [vec[i] if i in vec else 0.2 + 0.4 * ws for i, ws in zip(ids, words, strict=True)]
    if w.share and query:
        # a large share of the question's rare words is evidence; a small one is not
        shares = word_shares(archive, query, ids)
        meaning = [m + w.share * shares[i] if shares.get(i, 0.0) >= w.share_floor else m
                   for i, m in zip(ids, meaning, strict=True)]
    # the any-word fallback is no evidence: its word score counts only when every word matched
    sum_of = semantic.Weights(words=w.words if matched != "any" else 0.0, exact=0.0, floor=-1.0)
    ranked = semantic.fuse(words, [False] * len(ids), meaning, sum_of)
    pre = {ids[r.index]: r.score for r in ranked}  # best first
    # only the best few hundred can reach the first conversations: the rest is not read
    ids = list(pre)[: w.fused]
    stamps, chains = _times_and_chains(archive, ids)
    ids = [i for i in ids if i in stamps]  # a message deleted since the index was loaded
    fused: list[Candidate] = []
    via: dict[int, str] = {}
    for i in ids:
        fused.append(Candidate(i, -pre[i]))
        via[i] = "+".join(p for p, ok in (("words", i in lex), ("meaning", i in nearest_ids))
                          if ok)
    for c in fused:
        c.chain = chains[c.id]
    fused.sort(key=lambda c: (c.score, -c.id))
    return fused, via, stamps


def _by_conversation(archive: SessionArchive, fused: list[Candidate], vec: dict[int, float],
                     stamps: dict[int, float], index: VectorIndex, w: Policy,
                     current: bool = True) -> tuple[list[Candidate], dict[int, tuple[int, int]]]:
    """``fused`` grouped by conversation, conversations ordered by their score (best message
    plus support from its next best); and, when the question asks about the ``current`` state,
    the later conversations that look like updates of listed ones (:func:`_updates`)."""
    groups: dict[int, list[Candidate]] = {}
    for c in fused:
        groups.setdefault(c.chain, []).append(c)
    score: dict[int, float] = {}
    for chain, members in groups.items():
        support = sum(max(0.0, vec.get(c.id, 0.0) - w.floor)
                      for c in members[1: 1 + w.support_count])
        score[chain] = -members[0].score + w.support * support
    order = sorted(groups, key=lambda ch: (-score[ch], groups[ch][0].score, -groups[ch][0].id))
    newer = _updates(archive, order, groups, vec, stamps, index, w) if current else {}
    return [c for ch in order for c in groups[ch]], newer


_PRESENT = "is are am do does will now current currently nowadays these today moment s"
_EARLIER = ("did was were had used ago first originally original initially previously formerly "
            "before earlier didn wasn weren hadn")
#: words of a question about the present state of something ("what car do we drive?")
PRESENT = frozenset(_PRESENT.split(" "))
#: words of a question about a past event or an earlier state ("what did they first say?")
EARLIER = frozenset(_EARLIER.split(" "))


def asks_current(query: str) -> bool:
    """Whether ``query`` asks about the present state of something: a present-tense question
    with no past-tense or earlier-state word. Only such a question is answered by the latest
    statement of a changed fact; a question about an event ("what broke?", "what did I buy?"),
    a request ("suggest a book") or keywords are answered by whatever says it best."""
    words = set(re.findall(r"\w+", query.casefold()))
    return not PRESENT.isdisjoint(words) and EARLIER.isdisjoint(words)


#: words that state a change ("... is my manager now", "gave up on X", "back to the train")
CHANGE = re.compile(
    r"\b(now|nowadays|these days|any ?more|no longer|instead|switch(?:ed|ing)?|mov(?:ed|ing)|"
    r"(?:gave|given|giving) up|back (?:to|in|on)|gone back|retir(?:ed|ing)|chang(?:ed|ing)|"
    r"replac(?:ed|ing)|migrat(?:ed|ing)|stopped|quit)\b")


def states_change(text: str) -> bool:
    """Whether ``text`` says that something changed (what an update of a fact does)."""
    return CHANGE.search(text.casefold()) is not None


@dataclass
class _Listed:
    """What the update test needs of the first conversations: their best messages' ids, which
    of them state a change, the values their user messages give, their vectors, when and how
    relevant each conversation is."""

    members: dict[int, list[int]]
    changed: set[int]
    stated: dict[int, set[str]]
    mats: dict[int, Any]
    when: dict[int, float]
    relevance: dict[int, float]

    def says_change(self, later: int, earlier: int, w: Policy) -> bool:
        """Whether ``later`` states a change in so many words, or gives a new value for
        something ``earlier`` named."""
        return any(i in self.changed for i in self.members[later]) or (
            w.differs and _new_values(self.stated, self.members[later], self.members[earlier]))

    def updates(self, b: int, a: int, w: Policy) -> bool:
        """Whether ``b`` looks like an update of ``a`` (topic, time, relevance, a change)."""
        if a not in self.mats or b not in self.mats:
            return False
        if self.when[b] - self.when[a] < w.update_days * 86400.0:
            return False
        if not self.says_change(b, a, w):
            return False
        if self.relevance[b] < w.update_relevance * self.relevance[a]:
            return False
        return float(np.max(self.mats[a] @ self.mats[b].T)) >= w.same_topic


def _listed(archive: SessionArchive, head: list[int], groups: dict[int, list[Candidate]],
            vec: dict[int, float], stamps: dict[int, float], index: VectorIndex, w: Policy,
            ) -> _Listed:
    members = {ch: [c.id for c in groups[ch][: w.topic_messages]] for ch in head}
    every = [i for ids in members.values() for i in ids]
    said = _texts(archive, every)
    changed = ({i for i, (_role, t) in said.items() if states_change(t)} if w.change_word
               else set())
    # the values each user message gives, worked out once for every pair compared below
    stated = {i: values(t) for i, (role, t) in said.items() if role == "user"} if w.differs else {}
    rows = index.vectors(every)
    mats = {ch: np.stack([rows[i] for i in ids if i in rows]) for ch, ids in members.items()
            if any(i in rows for i in ids)}
    return _Listed(members, changed, stated, mats,
                   when={ch: stamps.get(groups[ch][0].id, 0.0) for ch in head},
                   relevance={ch: vec.get(groups[ch][0].id, 0.0) for ch in head})


def _updates(archive: SessionArchive, order: list[int], groups: dict[int, list[Candidate]],
             vec: dict[int, float], stamps: dict[int, float], index: VectorIndex, w: Policy,
             ) -> dict[int, tuple[int, int]]:
    """For each of the first conversations, the latest later one among them that looks like an
    update of it (see the module docstring: topic, time, relevance, a stated change; no score
    margin), with that conversation's best message."""
    head = order[: w.update_window]
    listed = _listed(archive, head, groups, vec, stamps, index, w)
    out: dict[int, tuple[int, int]] = {}
    for pos, b in enumerate(head):
        for a in head[:pos]:
            if a in out and listed.when[out[a][0]] >= listed.when[b]:
                continue
            if listed.updates(b, a, w):
                out[a] = (b, groups[b][0].id)
    return out


def _texts(archive: SessionArchive, ids: list[int]) -> dict[int, tuple[str, str]]:
    """The role and text of each of ``ids`` (a few dozen)."""
    rows = archive.read_in("SELECT id, role, content FROM messages WHERE id IN ({marks})", ids)
    return {int(i): (str(role), text) for i, role, text in rows if isinstance(text, str)}


_NUMBER_WORDS = ("one two three four five six seven eight nine ten eleven twelve twenty thirty "
                 "forty fifty hundred thousand half quarter single double")
#: number words: a count stated in words is a value like a figure
NUMBERS = frozenset(_NUMBER_WORDS.split(" "))
_TOKEN = re.compile(r"[^\W_]+(?:[.,:'\u2019][^\W_]+)*")


def values(text: str) -> set[str]:
    """The values a statement gives: figures, number words, and names (words capitalised
    inside a sentence), casefolded. A question (ending in ``?``) gives none."""
    out: set[str] = set()
    for sentence in re.split(r"(?<=[.!?;:])\s+", text.strip()):
        if sentence.endswith("?"):
            continue
        for k, m in enumerate(_TOKEN.finditer(sentence)):
            word = m.group()
            low = word.casefold().replace("\u2019", "'")  # one apostrophe
            if any(ch.isdigit() for ch in word) or low in NUMBERS or (
                    k > 0 and word[0].isupper() and low != "i"):
                out.add(low)
    return out


def _new_values(stated: dict[int, set[str]], later: list[int], earlier: list[int]) -> bool:
    """Whether a statement of the user's in ``later`` names something the user's messages in
    ``earlier`` named (a value of :func:`values`: the same thing) and gives a value they did not
    (what it is now). ``stated``: the values of each user message."""
    before = set().union(*(stated[i] for i in earlier if i in stated))
    return any(stated[i] & before and stated[i] - before for i in later if i in stated)


def _times_and_chains(archive: SessionArchive, ids: list[int],
                      ) -> tuple[dict[int, float], dict[int, int]]:
    """Each message's timestamp and compaction chain (one query per 900 ids)."""
    stamps: dict[int, float] = {}
    chains: dict[int, int] = {}
    for i, ts, chain in archive.read_in(
            "SELECT m.id, m.timestamp, s.chain FROM messages AS m JOIN sessions AS s ON "
            "s.num = m.session WHERE m.id IN ({marks})", ids):
        stamps[i], chains[i] = float(ts), int(chain)
    return stamps, chains
