"""Hybrid (words + meaning) search over the lossless archive, when an embedder is active.

Each archived message gets one vector beside its text (float16, 768 bytes per message at 384
dimensions: :mod:`hermes_core.storage.vectors`, the format every built-in store shares; the
float32 rows of earlier releases are read as they are), with the model id and the hash of the
text it was computed from: in the ``span_vectors`` table of the engine's own ``context.db``, or
in ``lossless_span_vectors`` of the ``storage.url`` database (:mod:`.vector_storage`, one module
over the storage dialect); the indexing and the fusion here are shared. A background thread
fills the table after each compaction, so archiving never waits for a model; a message without a
vector yet is found by its words only (:class:`hermes_core.storage.vectors.Indexer`, the thread
every store's vectors are filled by). After a switch of model the old vectors are ignored (never
compared with the new model's) and recomputed by the same thread.

A query is matched both ways and the two are fused into one score per message
(:func:`hermes_core.semantic.fuse`): the cosine of the query and the message, plus a word bonus
(BM25 over the best BM25 of the query, weighted more when every word matched), so an exact-word
match still ranks first and a paraphrase sharing no word is found. Each hit says which path found
it: ``words``, ``meaning`` or ``words+meaning``.

Without an embedder (none installed, ``embeddings.embedder: none``, ``lossless.semantic: false``,
or one that raises, hangs or returns vectors of the wrong size) the search is the word search of
:meth:`.store.SpanStore.search`, exactly, and the result says why meaning took no part.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_core.embeddings import off_reason
from hermes_core.semantic import Weights, fuse, text_key
from hermes_core.storage import vectors as stored_vectors

from .records import SearchHit, fts_terms
from .vector_storage import SpanVectorStorage

__all__ = ["HybridHit", "SpanVectors", "VectorStorage"]

#: where one archive's vectors live (one class over the storage dialect, every backend)
VectorStorage = SpanVectorStorage

log = logging.getLogger("hermes_core.plugins.lossless.vectors")
#: characters of a message embedded (the start of a long tool output says what it is)
_TEXT_CHARS = 2000
#: word matches considered for fusion (best first) and nearest vectors taken as candidates
_LEXICAL = 200
_NEIGHBOURS = 50
#: the word weight when no message held every word (the any-word fallback: weak evidence)
_ANY_WORDS = 0.4


@dataclass(frozen=True, slots=True)
class HybridHit:
    hit: SearchHit
    #: ``words``, ``meaning`` or ``words+meaning``
    via: str
    score: float


def _message_text(content: str, calls: str | None) -> str:
    text = content if content.strip() else (calls or "")
    return text[:_TEXT_CHARS]


class SpanVectors(stored_vectors.Indexer):
    """The vectors of one archive file and the thread that fills them."""

    def __init__(self, storage: SpanVectorStorage, embedder: Callable[[], Any], *, batch: int = 32,
                 weights: Weights | None = None, core: Any = None) -> None:
        super().__init__("lossless-vectors")
        self.storage = storage
        self._core = core  # the kernel's config: why semantic search is off, when it is
        self.path = storage.path
        self._source = embedder
        self.batch = batch
        self.weights = weights or Weights()
        #: why meaning takes no part right now (None: it does)
        self.problem: str | None = None
        self._embed_lock = threading.Lock()  # one query embedding at a time from this engine
        self._embedder: Any = None
        self._resolved = False

    # ----------------------------------------------------------------------------- embedder

    def embedder(self) -> Any:
        if not self._resolved:
            self._resolved = True
            try:
                self._embedder = self._source()
            except Exception as exc:  # a broken embedder choice must not break the engine
                self.problem = f"semantic search is off: {exc}"
            else:
                if self._embedder is None:
                    self.problem = off_reason(self._core)
        emb = self._embedder
        if emb is None:
            return None
        if not emb.ready():
            self.problem = emb.problem or f"embedder {emb.name} is paused"
            return None
        return emb

    # ------------------------------------------------------------------------------ indexer

    def wake(self) -> None:
        """Start (once) or wake the thread that embeds messages without a vector (:meth:`settle`
        waits until every archived message has one or the indexer gave up)."""
        if not self.stopping.is_set() and self.embedder() is not None:
            super().wake()

    def step(self) -> float | None:
        return 0.0 if self.index_batch() > 0 else None

    def failed(self, exc: Exception) -> None:
        log.warning("lossless: indexing vectors failed: %s", exc)

    def index_batch(self) -> int:
        """Embed up to ``batch`` messages that have no vector of the current model; how many."""
        emb = self.embedder()
        if emb is None:
            return 0
        rows = self.storage.unembedded(emb.model_id, self.batch)
        if not rows:
            return 0
        texts = [_message_text(c, t) for _i, c, t in rows]
        todo = [i for i, t in enumerate(texts) if t.strip()]
        try:  # the background lane: each slice once no turn is in flight
            blobs = stored_vectors.embed_encoded(emb, [texts[i] for i in todo])
        except Exception as exc:  # the guard paused it, or NaN or a wrong size: say so and stop
            self.problem = str(exc)
            return 0
        packed = dict(zip(todo, blobs, strict=True))
        # an empty message gets an empty vector: it is never compared, nor retried
        self.storage.put(emb.model_id, [(mid, text_key(texts[i]), packed.get(i, b""))
                                        for i, (mid, _c, _t) in enumerate(rows)])
        return len(rows)

    def prune(self) -> int:
        """Delete the vectors of messages no longer archived (after a forget); how many."""
        return self.storage.prune()

    def pending(self) -> int:
        """Archived messages without a vector of the current model (0 without an embedder)."""
        emb = self.embedder()
        if emb is None:
            return 0
        return self.storage.pending(emb.model_id)

    def close(self) -> None:
        self.stop()
        self.storage.close()

    # ------------------------------------------------------------------------------- search

    def search(self, conversation: str, query: str, *, limit: int = 8
               ) -> tuple[list[HybridHit], str | None] | None:
        """Hybrid hits for ``query``, best first, and why some messages lacked a vector; None
        when meaning cannot take part (the caller then runs the word search; see ``problem``)."""
        emb = self.embedder()
        if emb is None or not query.strip():
            return None
        try:
            with self._embed_lock:
                qv = emb.embed([query[:_TEXT_CHARS]])[0]
        except Exception as exc:
            self.problem = str(exc)
            return None
        self.problem = None
        terms = fts_terms(query)
        lexical, matched = self.storage.lexical(conversation, terms, _LEXICAL)
        rows, missing = self.storage.vectors(conversation, emb.model_id)
        # the rows are this model's (the query names it): earlier releases' float32 ones too
        sims = stored_vectors.cosines(qv, rows, emb.dimension, legacy=True)
        near = sorted(sims, key=lambda m: -sims[m])[:_NEIGHBOURS]
        ids = list(dict.fromkeys([*lexical, *near]))
        best = max(lexical.values(), default=0.0)
        scale = 1.0 if matched == "all" else _ANY_WORDS
        words = [scale * lexical[i] / best if i in lexical and best > 0 else 0.0 for i in ids]
        complete = [matched == "all" and i in lexical for i in ids]
        ranked = fuse(words, complete, [sims.get(i) for i in ids], self.weights)[:limit]
        found = self.storage.hits([ids[r.index] for r in ranked], terms)
        hits = [HybridHit(found[ids[r.index]], r.via, r.score) for r in ranked
                if ids[r.index] in found]
        note = (f"{missing} archived message(s) of this conversation have no vector yet and "
                "were matched by words only" if missing else None)
        if missing:
            self.wake()
        return hits, note
