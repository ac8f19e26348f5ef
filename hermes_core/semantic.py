"""Ranking by words and meaning together: what every plugin with a semantic search needs.

An embedder (``PluginContext.embedder``, see :mod:`hermes_core.embeddings`) turns texts into
L2-normalised vectors, so the cosine similarity of two texts is a dot product. This module holds
the generic parts a store needs around that:

* :func:`similarities` — the cosine of one query vector with many (numpy when installed, plain
  Python otherwise);
* :func:`word_scores` — a normalised word score per document, 0..1: the share of the query's
  words (weighted by how rare each is among the documents, IDF) that the document contains. It
  is absolute, not relative to the best document, so one common word out of five stays weak
  evidence;
* :func:`fuse` — one score per document: meaning (cosine), plus ``words`` times the word score,
  plus ``exact`` when the document holds every word of the query, so an exact-word match still
  wins and a paraphrase (no shared word) is found on meaning alone. A weighted sum of scores was
  measured better than reciprocal-rank fusion (ranks throw away how strong each match is);
* :class:`VectorCache` — vectors kept per (model id, hash of the text): a text that changes, or a
  switch of model, gets a new vector; vectors of different models are never mixed.

Nothing here imports numpy at import time, and nothing here calls an embedder except
:meth:`VectorCache.fill`, which goes through the guarded embedder (deadline, shape checks).
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Ranked",
    "VectorCache",
    "Weights",
    "fuse",
    "normalise",
    "query_words",
    "similarities",
    "text_key",
    "word_bag",
    "word_scores",
]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP_WORDS = (
    "a an the and or but of to in on at for with by from as is are was were be been being am "
    "has have had do does did it its this that these those there here i me my we us our you your "
    "he him his she her they them their what which who whom whose when where why how can could "
    "should would will shall may might must not no so than then too very just about into over "
    "any all some such only own same also again ever")
_STOP = frozenset(_STOP_WORDS.split(" "))


class _Embeds(Protocol):
    model_id: str
    dimension: int

    def embed(self, texts: Sequence[str], *, timeout: float | None = None,
              background: bool = False) -> Any: ...


def text_key(text: str) -> str:
    """A stable key for ``text`` (SHA-256 of its UTF-8 bytes; lone surrogates kept, not raised)."""
    import hashlib  # loads OpenSSL: paid by the first text embedded, not by an import

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _stem(word: str) -> str:
    # the lightest plural folding: "cashews" finds "cashew", "boxes" stays a word of its own
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def query_words(text: str) -> list[str]:
    """The content words of ``text``: casefolded, filler words dropped, plurals folded, once each."""
    words = [_stem(w) for w in _WORD.findall(text.casefold()) if w not in _STOP]
    return list(dict.fromkeys(w for w in words if w))


def word_bag(text: str) -> frozenset[str]:
    """The content words of ``text`` as a set (what :func:`word_scores` compares)."""
    return frozenset(query_words(text))


def word_scores(query: str, documents: Sequence[str], *,
                bags: Sequence[frozenset[str]] | None = None) -> tuple[list[float], list[bool]]:
    """Per document: the IDF-weighted share of the query's content words it contains (0..1), and
    whether it contains all of them. A query with no content word scores every document 0.
    ``bags`` are the documents' :func:`word_bag` when the caller keeps them."""
    terms = query_words(query)
    if not terms or not documents:
        return [0.0] * len(documents), [False] * len(documents)
    if bags is None:
        bags = [word_bag(d) for d in documents]
    n = len(bags)
    weights = {}
    for t in terms:
        df = sum(1 for b in bags if t in b)
        weights[t] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    total = sum(weights.values()) or 1.0
    scores, complete = [], []
    for bag in bags:
        hit = [t for t in terms if t in bag]
        scores.append(sum(weights[t] for t in hit) / total)
        complete.append(len(hit) == len(terms))
    return scores, complete


def normalise(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    norm = math.sqrt(sum(float(x) * float(x) for x in vector))
    return [float(x) / norm for x in vector] if norm > 0 else [0.0 for _ in vector]


def similarities(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """The cosine similarity of ``query`` with each of ``vectors`` (all of one dimension).

    Inputs need not be normalised: both sides are scaled to length 1 first.
    """
    if len(vectors) == 0:
        return []
    try:
        import numpy as np
    except ImportError:  # an API embedder without numpy installed: plain Python
        q = normalise(query)
        return [sum(a * b for a, b in zip(q, normalise(v), strict=True)) for v in vectors]
    qv = np.asarray(query, dtype=np.float32)
    if isinstance(vectors, np.ndarray):  # a matrix already (hermes_core.storage.vectors.decode)
        m = vectors.astype(np.float32, copy=False)
    elif isinstance(vectors[0], np.ndarray):
        m = np.stack(vectors).astype(np.float32, copy=False)  # type: ignore[arg-type]
    else:
        m = np.asarray(vectors, dtype=np.float32)
    if m.ndim != 2 or m.shape[1] != qv.shape[0]:
        raise ValueError(f"vectors of {m.shape[-1]} dimensions compared with a query of "
                         f"{qv.shape[0]}")
    qn = float(np.linalg.norm(qv)) or 1.0
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = 1.0
    return [float(x) for x in (m @ qv) / (norms * qn)]


@dataclass(frozen=True, slots=True)
class Weights:
    """How words and meaning add up (see the module docstring); tuned on MiniLM, where unrelated
    text has a cosine of about 0.0-0.25 and a paraphrase 0.4 or more."""

    #: weight of the normalised word score
    words: float = 0.25
    #: added when the document holds every content word of the query
    exact: float = 0.15
    #: a document found by meaning alone (no shared word) needs at least this cosine
    floor: float = 0.3


@dataclass(frozen=True, slots=True)
class Ranked:
    """One document's fused score and which path found it."""

    index: int
    score: float
    words: float
    meaning: float | None
    #: ``words``, ``meaning`` or ``words+meaning``
    via: str


def fuse(words: Sequence[float], complete: Sequence[bool],
         meaning: Sequence[float | None] | None, weights: Weights | None = None) -> list[Ranked]:
    """Documents ranked best first by one fused score; those found by neither path are left out.

    ``meaning`` is ``None`` when semantic ranking is off: the ranking is then by words alone
    (the word score, plus ``exact`` for a document holding every word). A document's meaning
    counts as found when its cosine reaches ``weights.floor``.
    """
    w = weights or Weights()
    out: list[Ranked] = []
    for i, ws in enumerate(words):
        sim = meaning[i] if meaning is not None else None
        by_words = ws > 0.0
        by_meaning = sim is not None and sim >= w.floor
        if not (by_words or by_meaning):
            continue
        score = w.words * ws + (w.exact if complete[i] and by_words else 0.0)
        if sim is not None:
            score += sim
        via = "words+meaning" if by_words and by_meaning else ("words" if by_words else "meaning")
        out.append(Ranked(i, score, ws, sim, via))
    out.sort(key=lambda r: (-r.score, r.index))
    return out


def _compact(vector: Sequence[float]) -> Any:
    # 1.5 KB per 384-dimension vector as float32 instead of ~12 KB of Python floats, and stacked
    # into a matrix without a per-element conversion at query time
    try:
        import numpy as np
    except ImportError:
        return tuple(float(x) for x in vector)
    out = np.array(vector, dtype=np.float32)
    out.setflags(write=False)
    return out


class VectorCache:
    """Vectors by (model id, text hash), bounded (least recently used dropped), thread-safe.

    Only vectors of the declared dimension are kept, and lookups name the model: a switch of
    embedder recomputes vectors instead of mixing dimensions or spaces.
    """

    def __init__(self, max_items: int = 20_000) -> None:
        self.max_items = max_items
        self._items: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, model_id: str, text: str) -> Any:
        """The vector (a float32 numpy array, or a tuple of floats without numpy), or None."""
        key = (model_id, text_key(text))
        with self._lock:
            vec = self._items.get(key)
            if vec is not None:
                self._items.move_to_end(key)
            return vec

    def put(self, model_id: str, text: str, vector: Sequence[float]) -> None:
        key = (model_id, text_key(text))
        stored = _compact(vector)
        with self._lock:
            self._items[key] = stored
            self._items.move_to_end(key)
            while len(self._items) > self.max_items:
                self._items.popitem(last=False)

    def missing(self, model_id: str, texts: Iterable[str]) -> list[str]:
        """The distinct ``texts`` that have no vector for ``model_id``, in order."""
        with self._lock:
            return [t for t in dict.fromkeys(texts) if (model_id, text_key(t)) not in self._items]

    def keep_only(self, texts: Iterable[str]) -> int:
        """Drop every vector whose text is not among ``texts`` (after a forget); returns how many."""
        keep = {text_key(t) for t in texts}
        with self._lock:
            gone = [k for k in self._items if k[1] not in keep]
            for k in gone:
                del self._items[k]
        return len(gone)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def fill(self, embedder: _Embeds, texts: Iterable[str], *, batch: int = 32,
             timeout: float | None = None, max_chars: int = 4000,
             background: bool = False) -> int:
        """Embed the ``texts`` that have no vector yet, ``batch`` at a time; returns how many were
        added. Raises what the embedder raises (an ``EmbeddingError`` from a guarded one); the
        vectors of batches done before are kept. ``background``: on the guarded embedder's
        background lane (each slice once turns pause)."""
        todo = self.missing(embedder.model_id, texts)
        added = 0
        for start in range(0, len(todo), batch):
            part = todo[start:start + batch]
            vectors = embedder.embed([t[:max_chars] for t in part], timeout=timeout,
                                     background=background)
            for text, vec in zip(part, vectors, strict=True):
                if len(vec) != embedder.dimension:
                    raise ValueError(f"the embedder returned a vector of {len(vec)} dimensions; "
                                     f"it declares {embedder.dimension}")
                self.put(embedder.model_id, text, vec)
                added += 1
        return added
