"""The one way a store keeps an embedding in a table: little-endian float16 bytes.

Every built-in store that keeps vectors beside its rows (the session archive's messages and
derived facts, the lossless engine's archived messages) writes them with :func:`encode` and
reads them with :func:`decode`, on SQLite (``BLOB``) and PostgreSQL (``BYTEA``) alike: 2 bytes
per dimension (768 bytes for MiniLM's 384), whose rounding moves a cosine by less than 0.001, so
a ranking is the one the float32 vectors give. A vector is stored with the model id that made
it, in the row or in the store's metadata; vectors of two models are never compared.

:func:`decode` also reads, when asked (``legacy``), the float32 rows (4 bytes per dimension)
the lossless engine wrote before this format was shared, so no store needs a migration to read
what it has; a row of any other length is another model's (or damaged) and is left out, never
an error.

Every such table has one shape: a row per item (a message), keyed by the item's id, holding
``model`` (the embedder's model id), ``text_hash`` (:func:`hermes_core.semantic.text_key` of the
text embedded) and ``vec``; both backends write it with :func:`upsert_sql`'s statement. A row of
another model is never compared with the current one's.

Around that table every store does the same three things, written here once: it embeds the
items without a vector of the active model in batches, off the turn (:class:`Indexer`, a daemon
thread woken after writes, and :func:`embed_encoded`, one batch through the embedder's background
lane); it writes them keyed by model id and text hash (:func:`upsert_sql`); and for a query it
reads them back and compares them with the query's vector (:func:`cosines`). What is the store's
own is its policy: which items are embedded, its table and columns, how a step finds work (a
cursor, or a join on the missing rows), how hits are ranked and fused
(:func:`hermes_core.semantic.fuse`), and any index kept for scale.

numpy is used when installed (every embedder that runs locally brings it); without it (an API
embedder) the same bytes are read and written with :mod:`struct`.
"""

from __future__ import annotations

import logging
import math
import struct
import threading
from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

from hermes_core.semantic import similarities

__all__ = ["BYTES_PER_DIMENSION", "Indexer", "cosines", "decode", "embed_encoded", "encode",
           "stored_size", "upsert_sql"]

log = logging.getLogger("hermes_core.storage.vectors")
K = TypeVar("K", bound=Hashable)

#: what :func:`encode` writes per dimension
BYTES_PER_DIMENSION = 2
_LEGACY = 4  # float32: the lossless engine's rows before 0.2


def stored_size(dimension: int) -> int:
    """Bytes of one encoded vector of ``dimension`` dimensions."""
    return BYTES_PER_DIMENSION * dimension


def encode(vectors: Any, dimension: int) -> list[bytes]:
    """Each of ``vectors`` (a matrix, or a sequence of sequences of floats) as float16 bytes.

    Raises ``ValueError`` naming the row when one has another dimension or holds NaN or an
    infinity (an embedder's fault: nothing of the batch is stored, the caller keeps its cursor).
    """
    try:
        import numpy as np
    except ImportError:
        return [_encode_plain(row, dimension, i) for i, row in enumerate(vectors)]
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.size == 0:
        return []
    if matrix.ndim != 2 or matrix.shape[1] != dimension:
        raise ValueError(f"vectors of shape {tuple(matrix.shape)} given; each must have "
                         f"{dimension} dimensions (the embedder's declared dimension)")
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise ValueError(f"vector {int(np.argmin(finite))} holds NaN or an infinite value")
    packed = matrix.astype("<f2")
    return [packed[i].tobytes() for i in range(len(packed))]


def _encode_plain(row: Sequence[float], dimension: int, index: int) -> bytes:
    values = [float(x) for x in row]
    if len(values) != dimension:
        raise ValueError(f"vector {index} has {len(values)} dimensions; each must have "
                         f"{dimension} (the embedder's declared dimension)")
    if not all(math.isfinite(x) for x in values):
        raise ValueError(f"vector {index} holds NaN or an infinite value")
    return struct.pack(f"<{dimension}e", *values)


def decode(blobs: Sequence[bytes | memoryview | None], dimension: int, *,
           legacy: bool = False) -> tuple[list[int], Any]:
    """The readable ones of ``blobs``: (their positions in ``blobs``, their vectors as float32:
    an ``(n, dimension)`` numpy matrix, or a list of tuples without numpy). A blob of another
    size, or None, is left out.

    ``legacy``: also read float32 rows (4 bytes per dimension). Only for rows known to be of
    this model (the row names it): by size alone, a float16 vector of twice the dimension
    looks the same."""
    sizes = (BYTES_PER_DIMENSION * dimension, _LEGACY * dimension if legacy else -1)
    keep = [i for i, b in enumerate(blobs) if b is not None and len(b) in sizes]
    try:
        import numpy as np
    except ImportError:
        return keep, [_decode_plain(bytes(blobs[i]), dimension) for i in keep]  # type: ignore[arg-type]
    out = np.empty((len(keep), dimension), dtype=np.float32)
    half = [i for i in keep if len(blobs[i]) == sizes[0]]  # type: ignore[arg-type]
    if len(half) == len(keep):  # the usual case: one join, one conversion
        if keep:
            out[:] = np.frombuffer(b"".join(bytes(blobs[i]) for i in keep),  # type: ignore[arg-type]
                                   dtype="<f2").reshape(len(keep), dimension)
        return keep, out
    for row, i in enumerate(keep):
        blob = bytes(blobs[i])  # type: ignore[arg-type]
        out[row] = np.frombuffer(blob, dtype="<f2" if len(blob) == sizes[0] else "<f4")
    return keep, out


def _decode_plain(blob: bytes, dimension: int) -> tuple[float, ...]:
    code = "e" if len(blob) == BYTES_PER_DIMENSION * dimension else "f"
    return struct.unpack(f"<{dimension}{code}", blob)


def upsert_sql(table: str, items: str, *, key: str = "id", item_key: str = "id",
               item_condition: str = "") -> str:
    """The statement that writes one vector row into ``table`` (SQLite spelling, ``?``
    placeholders; both backends run it): parameters (item id, model, text hash, vector bytes,
    item id again, then those of ``item_condition``). The row is written only while the item is
    still in ``items`` (``item_key`` = the id, and ``item_condition``, an SQL condition on that
    row), so an item deleted meanwhile (a forget) gets no vector; a row already there is
    replaced."""
    condition = f" AND {item_condition}" if item_condition else ""
    return (f"INSERT INTO {table}({key}, model, text_hash, vec) SELECT ?, ?, ?, ? WHERE EXISTS "
            f"(SELECT 1 FROM {items} WHERE {item_key} = ?{condition}) ON CONFLICT ({key}) DO "
            "UPDATE SET model = excluded.model, text_hash = excluded.text_hash, vec = excluded.vec")


def embed_encoded(embedder: Any, texts: Sequence[str], *,
                  stop: threading.Event | None = None) -> list[bytes]:
    """``texts`` embedded on the guarded embedder's background lane (each slice once turns have
    paused; ``stop``: give up when it is set) and :func:`encode`-d, in order. A vector of another
    dimension, or holding NaN or an infinity, raises ``EmbeddingError`` naming the embedder:
    nothing of the batch is stored, and what the embedder raises is raised as it is."""
    if not texts:
        return []
    extra = {} if stop is None else {"stop": stop}
    vectors = embedder.embed(list(texts), background=True, **extra)
    try:
        return encode(vectors, embedder.dimension)
    except ValueError as exc:
        from hermes_core.embeddings import EmbeddingError

        raise EmbeddingError(f"embedder {embedder.name}: {exc}") from None


def cosines(query: Sequence[float], rows: Sequence[tuple[K, bytes | memoryview | None]],
            dimension: int, *, legacy: bool = False) -> dict[K, float]:
    """key -> the cosine of ``query`` with that row's stored vector, for each (key, vector bytes)
    of ``rows`` that :func:`decode` reads (``legacy`` as there); a row of another size (another
    model's) or without a vector is left out."""
    keep, matrix = decode([blob for _key, blob in rows], dimension, legacy=legacy)
    sims = similarities(query, matrix) if keep else []
    return {rows[i][0]: sim for i, sim in zip(keep, sims, strict=True)}


class Indexer:
    """A daemon thread that fills a store's vector table off the turn, one :meth:`step` at a time.

    :meth:`wake` (after a write; it starts the thread the first time) runs steps until one returns
    None (nothing left, or nothing to do now); a step returning a number of seconds runs again
    after that pause (0: at once; an embedder paused, another node at work). An exception of a
    step goes to :meth:`failed` and the thread waits for the next wake-up (or :attr:`retry`
    seconds): it never dies, and what was not stored is found again by the next step. A step
    embeds through :func:`embed_encoded`, so it shares the CPU with no turn. :attr:`idle` is set
    while nothing is running or woken.
    """

    #: seconds the thread waits without a wake-up before it steps again (None: until woken)
    retry: float | None = None

    def __init__(self, name: str) -> None:
        self.name = name
        #: set by :meth:`stop`; a step passes it to what can wait (the embedding, a pause)
        self.stopping = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self._wake = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def step(self) -> float | None:
        """Embed and store one batch; None when done, else seconds to wait before the next."""
        raise NotImplementedError

    def failed(self, exc: Exception) -> None:
        """A step raised ``exc`` (a database outage, a bug): the thread waits for a wake-up."""
        log.warning("%s: indexing vectors failed: %s", self.name, exc)

    def start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def wake(self) -> None:
        """Start (once) or wake the thread: there may be items without a vector."""
        if self.stopping.is_set():
            return
        self.idle.clear()
        self._wake.set()
        self.start()

    def settle(self, timeout: float = 60.0) -> bool:
        """Wait (bounded) until the thread has nothing running or woken."""
        return self.idle.wait(timeout)

    def stop(self, timeout: float | None = None) -> None:
        """End the thread after its step (waiting at most ``timeout`` seconds for it)."""
        self.stopping.set()
        self._wake.set()
        if timeout is not None and self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self.stopping.is_set():
            self._wake.wait(self.retry)
            self._wake.clear()
            try:
                while not self.stopping.is_set():
                    pause = self.step()
                    if pause is None:
                        break
                    if pause:
                        self.stopping.wait(pause)
            except Exception as exc:  # the thread must not die: the next wake-up tries again
                if not self.stopping.is_set():  # not the store closed under it at shutdown
                    self.failed(exc)
            finally:
                if not self._wake.is_set():
                    self.idle.set()
