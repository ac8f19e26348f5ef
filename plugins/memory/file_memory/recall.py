"""Ranking the entries of MEMORY.md / USER.md by words and meaning (prefetch and ``search``).

With an embedder active (``PluginContext.embedder``; ``embeddings.embedder`` picks it) each entry
gets a vector, kept in memory by (model id, hash of the entry text): an edited entry gets a new
one, a switch of model recomputes them all, and vectors of two models are never compared. The
files stay the only source of truth: nothing here writes to them, and no vector is stored on disk
(so a ``forget`` leaves no trace of the entry behind; the cache is pruned at once).

Entry vectors are computed off the turn's critical path, on this provider's own thread (a
session start, a write, ``queue_prefetch``) through the embedder's background lane, so only while
no turn is in flight (the model is loaded there too). ``prefetch`` only embeds the user's message,
on a second thread, and waits for that at most ``recall_timeout`` seconds, never for a model not
loaded yet; an entry without a vector yet takes part by its words.

Without an embedder — none installed, ``embeddings.embedder: none``, ``file_memory.semantic:
false``, or one that raises, hangs or returns vectors of the wrong size — the ranking is by words
only, :attr:`EntryRecall.problem` says why, and ``prefetch`` recalls nothing, exactly as before.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hermes_core import threats
from hermes_core.embeddings import EmbedderClosed, off_reason
from hermes_core.semantic import (
    Ranked,
    VectorCache,
    Weights,
    fuse,
    similarities,
    word_bag,
    word_scores,
)

from .store import FILENAMES

__all__ = ["EntryRecall", "Hit", "render_recall"]

log = logging.getLogger("hermes_core.plugins.file_memory.recall")

#: characters of the user's message embedded (a pasted log must not cost a long forward pass)
_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Hit:
    """One entry found for a query."""

    target: str
    entry: str
    score: float
    #: ``words``, ``meaning`` or ``words+meaning``
    via: str
    meaning: float | None


class EntryRecall:
    """Hybrid ranking of one provider's entries; never raises into a turn."""

    def __init__(self, embedder: Callable[[], Any], *, enabled: bool = True,
                 weights: Weights | None = None, batch: int = 32, core: Any = None) -> None:
        self._source = embedder
        self._core = core  # the kernel's config: why semantic ranking is off, when it is
        self.enabled = enabled
        self.weights = weights or Weights()
        self.batch = batch
        self.cache = VectorCache()
        #: why semantic ranking is off right now, in one sentence (None: it is on)
        self.problem: str | None = None
        self._embedder: Any = None
        self._resolved = False
        self._lock = threading.Lock()
        # entry vectors are computed on this thread (through the embedder's background lane:
        # they wait for turns to pause), queries on the second (never behind entry vectors)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="file-memory-vectors")
        self._queries = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="file-memory-query")
        self._pending: set[tuple[str, ...]] = set()
        self._loaded: set[str] = set()  # model ids that produced vectors (the model is loaded)
        # per entry text: its word set and whether the threat scan flags it (both only depend
        # on the text; bounded like the vectors)
        self._seen: dict[str, tuple[frozenset[str], bool]] = {}

    # ----------------------------------------------------------------------------- embedder

    def embedder(self) -> Any:
        """The guarded embedder, or None (then :attr:`problem` says why)."""
        if not self.enabled:
            self.problem = "semantic ranking is off (file_memory.semantic: false)"
            return None
        with self._lock:
            if not self._resolved:
                self._resolved = True
                try:
                    self._embedder = self._source()
                except Exception as exc:  # a broken embedder choice must not break the memory
                    self.problem = f"semantic ranking is off: {exc}"
                    log.warning("file_memory: %s", self.problem)
                    self._embedder = None
                else:
                    if self._embedder is None:
                        self.problem = off_reason(self._core, "semantic ranking")
        emb = self._embedder
        if emb is not None:
            self.problem = getattr(emb, "problem", None) if not emb.ready() else None
        return emb if emb is not None and emb.ready() else None

    # ------------------------------------------------------------------------------ vectors

    def warm(self, entries: Sequence[str]) -> concurrent.futures.Future[int] | None:
        """Compute the missing vectors of ``entries`` on the provider's thread; returns at once."""
        emb = self.embedder()
        if emb is None:
            return None
        todo = tuple(self.cache.missing(emb.model_id, entries))
        if not todo:
            return None
        with self._lock:
            if todo in self._pending:
                return None
            self._pending.add(todo)
        return self._pool.submit(self._fill, emb, todo)

    def _fill(self, emb: Any, todo: tuple[str, ...]) -> int:
        try:
            added = self.cache.fill(emb, todo, batch=self.batch, background=True)
            self._loaded.add(emb.model_id)
            return added
        except EmbedderClosed as exc:  # shutting down before turns paused: the next start fills
            log.debug("file_memory: entry vectors not computed: %s", exc)
            return 0
        except Exception as exc:  # EmbeddingError (already logged by the guard) or a bad vector
            self.problem = str(exc) if "semantic" in str(exc) else (
                f"semantic ranking is unavailable: {exc}; word search still works")
            log.warning("file_memory: entry vectors not computed: %s", exc)
            return 0
        finally:
            with self._lock:
                self._pending.discard(todo)

    def settle(self, timeout: float = 60.0) -> None:
        """Wait (bounded) until the vector work queued so far is done (tests, the bench)."""
        self._pool.submit(lambda: None).result(timeout=timeout)
        self._queries.submit(lambda: None).result(timeout=timeout)

    def forget(self, remaining: Sequence[str]) -> None:
        """Keep only the vectors of ``remaining`` entries (called after a forget)."""
        self.cache.keep_only(remaining)
        self._seen.clear()

    def _look(self, entry: str) -> tuple[frozenset[str], bool]:
        seen = self._seen.get(entry)
        if seen is None:
            if len(self._seen) > 20_000:
                self._seen.clear()
            seen = self._seen[entry] = (word_bag(entry), threats.scan(entry) is not None)
        return seen

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._queries.shutdown(wait=False, cancel_futures=True)

    def _query_vector(self, emb: Any, query: str, budget: float | None) -> Any:
        """The query's vector, waiting at most ``budget`` seconds (None: the embedder's own
        deadline, after any vector work queued before); None when it did not come in time. A
        late answer is dropped, and does not pause the embedder."""
        cached = self.cache.get(emb.model_id, query[:_QUERY_CHARS])
        if cached is not None:
            return cached
        if budget is not None and not (emb.model_id in self._loaded
                                       or getattr(emb, "loaded", True)):
            getattr(emb, "load_when_paused", lambda: None)()
            return None  # the model is not loaded yet: loading takes seconds, not this turn's
        future = self._queries.submit(self._embed_query, emb, query[:_QUERY_CHARS])
        wait = budget if budget is not None else float(getattr(emb, "timeout", 10.0))
        try:
            return future.result(timeout=wait)
        except concurrent.futures.TimeoutError:
            self.problem = (f"semantic ranking skipped for this query: the embedder did not "
                            f"answer within {wait:g} s; word search still works")
            return None

    def prepare_query(self, query: str) -> None:
        """Compute ``query``'s vector on the provider's thread, as background work (once turns
        pause; returns at once)."""
        emb = self.embedder()
        text = query[:_QUERY_CHARS]
        if emb is not None and self.cache.get(emb.model_id, text) is None:
            self._pool.submit(self._embed_query, emb, text, True)

    def _embed_query(self, emb: Any, text: str, background: bool = False) -> Any:
        try:
            vec = (emb.embed([text], background=True) if background else emb.embed([text]))[0]
        except Exception as exc:
            self.problem = str(exc)
            return None
        if len(vec) != emb.dimension:
            return None
        self._loaded.add(emb.model_id)
        self.cache.put(emb.model_id, text, vec)
        return vec

    # ------------------------------------------------------------------------------ ranking

    def rank(self, query: str, entries: Sequence[tuple[str, str]], *,
             budget: float | None = None) -> tuple[list[Hit], str | None]:
        """``entries`` ((target, text) pairs) found for ``query``, best first, and why meaning
        took no part (None when it did). Entries the threat scan flags are never returned."""
        looked = [(t, e, self._look(e)) for t, e in entries]
        clean = [(t, e) for t, e, (_bag, flagged) in looked if not flagged]
        texts = [e for _t, e in clean]
        words, complete = word_scores(query, texts,
                                      bags=[bag for _t, _e, (bag, flagged) in looked if not flagged])
        meaning = self._meaning_scores(query, texts, budget)
        ranked: list[Ranked] = fuse(words, complete, meaning, self.weights)
        hits = [Hit(clean[r.index][0], clean[r.index][1], r.score, r.via, r.meaning)
                for r in ranked]
        if meaning is not None:
            return hits, None
        return hits, self.problem or "semantic ranking is off"

    def _meaning_scores(self, query: str, texts: list[str],
                        budget: float | None) -> list[float | None] | None:
        """Each text's similarity to ``query`` (None: it has no vector yet), or None when meaning
        takes no part in this ranking."""
        emb = self.embedder()
        if emb is None or not texts:
            return None
        self.warm(texts)  # entries without a vector (new ones) get it on the thread
        if not query.strip():
            return None
        qv = self._query_vector(emb, query, budget)
        if qv is None:
            if self.problem is None:
                self.problem = ("semantic ranking is warming up: entry vectors are being "
                                "computed; word search still works")
            return None
        vecs = [self.cache.get(emb.model_id, t) for t in texts]
        have = [i for i, v in enumerate(vecs) if v is not None]
        sims = similarities(qv, [vecs[i] for i in have])  # type: ignore[misc]
        meaning: list[float | None] = [None] * len(texts)
        for i, s in zip(have, sims, strict=True):
            meaning[i] = s
        return meaning


def render_recall(hits: Sequence[Hit]) -> str:
    """The prefetch text: the recalled entries, each with the file it is in."""
    lines = ["Saved memory entries related to this message:"]
    lines += [f"- ({FILENAMES.get(h.target, h.target)}) {h.entry}" for h in hits]
    return "\n".join(lines)
