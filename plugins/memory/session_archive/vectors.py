"""Message vectors beside the text: storage, the in-memory matrix, and the background indexer.

What is embedded: the content of user and assistant messages that are searchable (not copies a
compaction carried over, not the search tools' echoes), cut to its first :data:`TEXT_CHARS`
characters (the model reads 256 tokens anyway). Tool outputs are left to word search.

Storage (through vector_store.py, one interface for both backends): table ``message_vectors``
(state.db schema version 3; PostgreSQL migration 4): one float16 row per message, 768 bytes for
384 dimensions. The meta table (``meta``; ``archive_meta`` on PostgreSQL) holds the model id and
dimension the vectors were made with, ``vectors_through``, the id up to which every message was
considered (the indexer's cursor), so indexing resumes where it stopped and never rereads the
archive, and ``vectors_epoch``, bumped by a rebuild so every loaded index starts again. On
PostgreSQL several nodes share the vectors: one embeds a batch at a time (an advisory lock), and
each node's index reads what any node stored since its last look.

Search (:class:`VectorIndex`): the sign bit of each dimension is kept in memory (48 bytes per
message for 384 dimensions); a query scans every row's Hamming distance to its own sign bits,
then ranks the closest few hundred by the exact cosine of their stored float16 vectors.

The indexer is a daemon thread per archive, woken when messages are appended; it embeds in
batches through the guarded embedder and never holds a turn (the append path only sets an event).
A failing embedder pauses it; nothing is lost, the cursor stays where it was.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes_core.embeddings import EmbeddingError, GuardedEmbedder

from .store import SessionArchive
from .vector_store import BUSY, VectorStore, vector_store

__all__ = ["TEXT_CHARS", "VectorIndex", "VectorIndexer", "VectorState", "reindex"]

log = logging.getLogger("hermes_core.plugins.session_archive")

TEXT_CHARS = 2000


@dataclass
class VectorState:
    """What the stored vectors are, and whether they fit the current embedder."""

    model: str | None
    dimension: int
    through: int
    count: int
    #: None when usable with the current embedder; else what is wrong and what to run
    problem: str | None = None


def state(archive: SessionArchive, embedder: GuardedEmbedder | None, *,
          count: bool = True) -> VectorState:
    """The stored vectors' model, cursor and (with ``count``: a table scan) how many there are.

    Without ``count`` (the per-query check: one statement), ``count`` is 1 when there are any,
    else 0.
    """
    store = vector_store(archive)
    meta = store.meta(exists=not count)
    model = meta.get("vectors_model")
    dim = int(meta.get("vectors_dimension") or 0)
    through = int(meta.get("vectors_through") or 0)
    n = store.count() if count else int(meta.get("exists", "0"))
    st = VectorState(model, dim, through, n)
    if embedder is not None and model is not None and n and (
            model != embedder.model_id or dim != embedder.dimension):
        st.problem = (f"the archive's vectors were made by {model} ({dim} dimensions) and the "
                      f"embedder is now {embedder.model_id} ({embedder.dimension}); run "
                      "'hermes-core sessions reindex' to rebuild them (word search works "
                      "meanwhile)")
    return st


def _claim(store: VectorStore, con: Any, embedder: GuardedEmbedder) -> bool:
    """Record the model on an archive without vectors; False when another model's are there."""

    def tx(c: Any) -> bool:
        meta = store.meta(c)
        model = meta.get("vectors_model")
        if model is not None and model != embedder.model_id and store.any_vector(c):
            return False
        if model != embedder.model_id or "vectors_dimension" not in meta:
            store.set_meta(c, "vectors_model", embedder.model_id)
            store.set_meta(c, "vectors_dimension", str(embedder.dimension))
        return True

    return bool(store._write(con, tx))


def index_batch(archive: SessionArchive, embedder: GuardedEmbedder, size: int = 32) -> int:
    """Embed the next ``size`` pending messages; return how many were considered (0: done;
    :data:`~.vector_store.BUSY`: another node of a shared database is indexing).

    Raises EmbeddingError when the embedder fails (the cursor does not move: nothing is lost).
    """
    store = vector_store(archive)
    return store.exclusive(lambda con: _batch(store, con, embedder, size), BUSY)


def _batch(store: VectorStore, con: Any, embedder: GuardedEmbedder, size: int) -> int:
    if not _claim(store, con, embedder):
        return 0
    through = int(store.meta(con).get("vectors_through") or 0)
    rows = store.pending_rows(con, through, size, TEXT_CHARS)
    if not rows:
        return 0
    blobs = _blobs(embedder, rows)
    last = max(through, int(rows[-1][0]))

    def tx(c: Any) -> None:
        store.put(c, blobs, TEXT_CHARS)
        # a message that took the id of one deleted meanwhile got no vector: stop before it
        unstored = store.unstored(c, [b[0] for b in blobs])
        store.set_meta(c, "vectors_through", str(min([last, *(i - 1 for i in unstored)])))

    store._write(con, tx)
    return len(rows)


def _blobs(embedder: GuardedEmbedder, rows: list[Any]) -> list[tuple[int, bytes, str]]:
    """(id, float16 vector, text) of each pending (id, text) row."""
    vectors = np.asarray(embedder.embed([r[1] for r in rows], background=True),
                         dtype=np.float32)
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingError(f"embedder {embedder.name} returned NaN or infinite values")
    return [(int(r[0]), vectors[i].astype(np.float16).tobytes(), str(r[1]))
            for i, r in enumerate(rows)]


def _fill(store: VectorStore, con: Any, *, embedder: GuardedEmbedder, size: int,
          after: int, upto: int | None = None) -> tuple[int, int]:
    """Embed the next ``size`` messages after id ``after`` (up to id ``upto``) that have no
    vector, wherever the cursor is; (how many, the last id considered). The cursor only moves
    forward."""
    if not _claim(store, con, embedder):
        return 0, after
    rows = store.missing_rows(con, after, size, TEXT_CHARS, upto)
    if not rows:
        return 0, after
    blobs = _blobs(embedder, rows)
    last = int(rows[-1][0])

    def tx(c: Any) -> None:
        store.put(c, blobs, TEXT_CHARS)
        if last > int(store.meta(c).get("vectors_through") or 0):
            store.set_meta(c, "vectors_through", str(last))

    store._write(con, tx)
    return len(rows), last


def has_pending(archive: SessionArchive) -> bool:
    """Whether some stored message still waits for its vector (the indexer's own test)."""
    store = vector_store(archive)
    through = int(store.meta().get("vectors_through") or 0)
    return bool(store.pending_rows(None, through, 1, 1))


def pending(archive: SessionArchive) -> int:
    store = vector_store(archive)
    return store.pending_count(int(store.meta().get("vectors_through") or 0))


def reindex(archive: SessionArchive, embedder: GuardedEmbedder, *, batch: int = 32,
            progress: Callable[[int, int], None] | None = None, rebuild: bool = False) -> int:
    """Embed every message that has no vector (all of them with ``rebuild``, after dropping
    the old vectors): one sweep over the whole archive, not only past the indexer's cursor, so
    any gap is filled (a long transaction that committed ids the cursor had passed, on
    PostgreSQL; ids given again after a delete, on SQLite). ``progress(done, total)`` after
    each batch, ``total`` growing when messages are stored meanwhile (``done`` never passes
    it). Returns the messages embedded. On a shared database each batch waits for the batch
    another node is embedding (the vectors it stores are skipped)."""
    store = vector_store(archive)
    if rebuild or state(archive, embedder, count=False).problem:
        # the embedder must answer before the vectors it replaces are dropped: a broken one
        # (or a mistyped model path) would otherwise leave the archive with none at all
        embedder.embed(["a test sentence"], background=True)
        store.exclusive(lambda con: store._write(con, store.clear), None, wait=True)
    total = store.missing_count()
    done = after = 0
    while True:
        n, after = store.exclusive(
            functools.partial(_fill, store, embedder=embedder, size=batch, after=after),
            (0, after), wait=True)
        if n == 0:
            break
        done += n
        if progress is not None:
            if done >= total:  # messages stored meanwhile (a turn, another process): count them
                total = done + store.missing_count()
            progress(done, total)
    return done


#: vectors read per statement while loading the index (the archive's lock is held per statement)
LOAD_CHUNK = 20_000
#: rows scanned per block of the sign-bit scan (keeps its temporary arrays small)
SCAN_BLOCK = 1 << 17
#: nearest candidates by sign bits that are rescored with their stored float16 vectors
RESCORE = 400

_POPCOUNT8 = None


def _popcount(x: NDArray[np.uint64]) -> NDArray[np.uint8]:
    """Set bits per 64-bit word (numpy >= 2: one instruction per word; else a byte table)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(x)  # type: ignore[no-any-return]
    global _POPCOUNT8
    if _POPCOUNT8 is None:
        _POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
    return _POPCOUNT8[x.view(np.uint8)].reshape(*x.shape, 8).sum(-1, dtype=np.uint8)  # type: ignore[no-any-return]


def sign_bits(vectors: NDArray[np.floating], words: int) -> NDArray[np.uint64]:
    """One bit per dimension (1: positive), packed into ``words`` 64-bit words per row, laid out
    word-major ``(words, rows)`` so the scan reads each word of every row contiguously."""
    packed = np.packbits(np.asarray(vectors) > 0, axis=1)
    pad = words * 8 - packed.shape[1]
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed.view(np.uint64).T)


class VectorIndex:
    """The archive's vectors for search: sign bits to scan, int8 copies to rescore.

    Memory holds one bit per dimension per message (48 bytes for 384 dimensions) and, with
    ``in_memory`` (the default), an int8 copy of each vector (384 bytes, plus 4 for its scale):
    ~440 bytes per message, 440 MB for a million. A query scans every row's Hamming distance to
    the query's sign bits (a few milliseconds per million rows with numpy), keeps the
    :data:`RESCORE` closest, and ranks those by their cosine with the int8 copies (within ~1%
    of the float16 one). Without ``in_memory`` (56 bytes per message) the candidates' float16
    vectors are read from the archive by id instead: ~10-20 ms more per query on a busy
    machine. The scan is exhaustive (no row is skipped, whatever its age); the only
    approximation is that a vector whose sign pattern is far from the query's is not rescored,
    which for sentence embeddings loses almost nothing among the first hundred (measured in
    bench/bench_session_archive.py). Loading reads the table once, in chunks, then only rows
    added since (in commit order: on PostgreSQL, also those another node stored, and the late
    vector of an older message); a search during the first load uses what is loaded so far.
    """

    def __init__(self, archive: SessionArchive, *, rescore: int = RESCORE,
                 in_memory: bool = True) -> None:
        self.archive = archive
        self.rescore = rescore
        #: keep an int8 copy of each vector in memory for rescoring (else read the floats)
        self.in_memory = in_memory
        self._lock = threading.Lock()
        self._ids: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._bits: NDArray[np.uint64] = np.zeros((0, 0), dtype=np.uint64)
        self._q8: NDArray[np.int8] = np.zeros((0, 0), dtype=np.int8)
        self._scale: NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        self._n = 0
        self._loaded_through = 0
        #: (model, epoch) of the loaded vectors: a change (reindex) reloads them
        self._model: tuple[str | None, str | None] = (None, None)
        self._dimension = 0
        #: True once a refresh reached the end of the table
        self.complete = False

    def __len__(self) -> int:
        return self._n

    @property
    def ids(self) -> NDArray[np.int64]:
        return self._ids[: self._n]

    def memory_bytes(self) -> int:
        return int(self._ids.nbytes + self._bits.nbytes + self._q8.nbytes + self._scale.nbytes)

    def refresh(self, dimension: int, *, wait: bool = True) -> bool:
        """Read vectors added since the last refresh. With ``wait=False`` and another thread
        loading, return at once (False) and let the caller search what is loaded."""
        if not self._lock.acquire(blocking=wait):
            return False
        try:
            store = vector_store(self.archive)
            meta = store.meta()
            model = (meta.get("vectors_model"), meta.get("vectors_epoch"))
            if model != self._model or dimension != self._dimension:
                self._reset(model, dimension)
            while True:  # in commit order: a late vector of an older message is read too
                rows = store.since(self._loaded_through, LOAD_CHUNK)
                if not rows:
                    break
                self._append(rows, dimension)
                self._loaded_through = int(rows[-1][2])
                if len(rows) < LOAD_CHUNK:
                    break
            if len(self._ids) > 1.25 * self._n + 1024:  # the doubling overshot: give it back
                self._resize(self._n + self._n // 10 + 1024)
            self.complete = True
            return True
        finally:
            self._lock.release()

    def _reset(self, model: tuple[str | None, str | None], dimension: int) -> None:
        words = max(1, -(-dimension // 64))
        self._ids = np.zeros(1024, dtype=np.int64)
        self._bits = np.zeros((words, 1024), dtype=np.uint64)
        self._q8 = np.zeros((1024 if self.in_memory else 0, dimension), dtype=np.int8)
        self._scale = np.zeros(1024 if self.in_memory else 0, dtype=np.float32)
        self._n, self._loaded_through = 0, 0
        self._model, self._dimension = model, dimension
        self.complete = False

    def _resize(self, cap: int) -> None:
        """New arrays of ``cap`` rows holding the current ones (readers keep the old arrays)."""
        n, dimension = self._n, self._dimension
        ids_new = np.zeros(cap, dtype=np.int64)
        bits_new = np.zeros((self._bits.shape[0], cap), dtype=np.uint64)
        ids_new[:n] = self._ids[:n]
        bits_new[:, :n] = self._bits[:, :n]
        if self.in_memory:
            q8_new = np.zeros((cap, dimension), dtype=np.int8)
            scale_new = np.zeros(cap, dtype=np.float32)
            q8_new[:n] = self._q8[:n]
            scale_new[:n] = self._scale[:n]
            self._q8, self._scale = q8_new, scale_new
        self._ids, self._bits = ids_new, bits_new

    def _append(self, rows: list[Any], dimension: int) -> None:
        good = [r for r in rows if len(r[1]) == 2 * dimension]  # another model's: state() says
        if not good:
            return
        ids = np.fromiter((r[0] for r in good), dtype=np.int64, count=len(good))
        vecs = np.frombuffer(b"".join(r[1] for r in good), dtype=np.float16).reshape(
            len(good), dimension).astype(np.float32)
        bits = sign_bits(vecs, self._bits.shape[0])
        if self.in_memory:  # int8 per row, scaled by the row's largest magnitude
            peak = np.maximum(np.abs(vecs).max(axis=1), 1e-12)
            q8 = np.rint(vecs / peak[:, None] * 127).astype(np.int8)
            scale = (peak / 127).astype(np.float32)
        n = self._n
        if n and int(ids.min()) <= int(self._ids[n - 1]):
            self._merge(ids, bits, q8 if self.in_memory else None,
                        scale if self.in_memory else None)
            return
        order = np.argsort(ids, kind="stable")
        if not np.array_equal(order, np.arange(len(ids))):
            ids, bits = ids[order], bits[:, order]
            if self.in_memory:
                q8, scale = q8[order], scale[order]
        need = n + len(good)
        if need > len(self._ids):  # grow by doubling; readers keep their old arrays
            self._resize(max(need, 2 * len(self._ids)))
        self._ids[n: need] = ids
        self._bits[:, n: need] = bits
        if self.in_memory:
            self._q8[n: need] = q8
            self._scale[n: need] = scale
        self._n = need  # published last: a reader sees whole rows only

    def _merge(self, ids: NDArray[np.int64], bits: NDArray[np.uint64],
               q8: NDArray[np.int8] | None, scale: NDArray[np.float32] | None) -> None:
        """Rows that do not all come after the loaded ones (on PostgreSQL, the vector of an
        older message committed late; or a vector stored again): a known id is replaced in
        place, the others are merged in, into new arrays kept in id order (rare: a copy)."""
        n = self._n
        known = self._ids[:n]
        pos = np.minimum(np.searchsorted(known, ids), n - 1)
        old = known[pos] == ids
        if old.any():
            at = pos[old]
            self._bits[:, at] = bits[:, old]
            if q8 is not None and scale is not None:
                self._q8[at], self._scale[at] = q8[old], scale[old]
        new = ~old
        if not new.any():
            return
        all_ids = np.concatenate([known, ids[new]])
        order = np.argsort(all_ids, kind="stable")
        cap = max(len(all_ids) + 1024, len(self._ids))
        ids_new = np.zeros(cap, dtype=np.int64)
        ids_new[: len(order)] = all_ids[order]
        bits_new = np.zeros((self._bits.shape[0], cap), dtype=np.uint64)
        bits_new[:, : len(order)] = np.concatenate([self._bits[:, :n], bits[:, new]], axis=1)[
            :, order]
        if q8 is not None and scale is not None:
            q8_new = np.zeros((cap, self._dimension), dtype=np.int8)
            scale_new = np.zeros(cap, dtype=np.float32)
            q8_new[: len(order)] = np.concatenate([self._q8[:n], q8[new]])[order]
            scale_new[: len(order)] = np.concatenate([self._scale[:n], scale[new]])[order]
            self._q8, self._scale = q8_new, scale_new
        self._ids, self._bits = ids_new, bits_new
        self._n = len(order)

    def vectors(self, ids: list[int]) -> dict[int, NDArray[np.float32]]:
        """The vectors of ``ids`` (those that have one), as float32: from the in-memory int8
        copies when kept, else the stored float16 rows."""
        out: dict[int, NDArray[np.float32]] = {}
        if self.in_memory:
            n = self._n
            known, q8, scale = self._ids[:n], self._q8[:n], self._scale[:n]
            if not n or not ids:
                return out
            wanted = np.asarray(ids, dtype=np.int64)
            pos = np.minimum(np.searchsorted(known, wanted), n - 1)
            for i, p in zip(ids, pos, strict=True):
                if known[p] == i:
                    out[int(i)] = q8[p].astype(np.float32) * scale[p]
            return out
        dim = self._dimension
        for i, blob in vector_store(self.archive).by_ids(list(ids)):
            if len(blob) == 2 * dim:
                out[int(i)] = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
        return out

    def similarities(self, query: NDArray[np.float32], ids: list[int]) -> dict[int, float]:
        """The cosine of ``query`` with each of ``ids`` that has a vector."""
        if self.in_memory:  # one gather and one product for all of them
            n = self._n
            known, q8, scale = self._ids[:n], self._q8[:n], self._scale[:n]
            if not n or not ids:
                return {}
            wanted = np.asarray(ids, dtype=np.int64)
            pos = np.minimum(np.searchsorted(known, wanted), n - 1)
            hit = known[pos] == wanted
            pos, wanted = pos[hit], wanted[hit]
            sims = (q8[pos].astype(np.float32) @ np.asarray(query, dtype=np.float32)) * scale[pos]
            return dict(zip(wanted.tolist(), sims.tolist(), strict=True))
        vecs = self.vectors(ids)
        if not vecs:
            return {}
        keys = list(vecs)
        sims = np.stack([vecs[i] for i in keys]) @ query
        return {i: float(s) for i, s in zip(keys, sims, strict=True)}

    def _snapshot(self) -> tuple[int, NDArray[np.int64], NDArray[np.uint64], NDArray[np.int8],
                                 NDArray[np.float32]]:
        """The row count and the arrays holding them, read once (a refresh may swap them)."""
        n = self._n
        return n, self._ids[:n], self._bits[:, :n], self._q8[:n], self._scale[:n]

    def _closest(self, query: NDArray[np.float32], count: int,
                 bits: NDArray[np.uint64] | None = None, threads: int = 2) -> NDArray[np.intp]:
        """Positions of (at least) the ``count`` rows whose sign bits are closest to the
        query's: every row's Hamming distance, then a cut-off at the ``count``-th smallest."""
        if bits is None:
            bits = self._bits[:, : self._n]
        n = bits.shape[1]
        words = bits.shape[0]
        q = sign_bits(query[None, :], words)[:, 0]
        dist = np.empty(n, dtype=np.uint16)

        def scan(blocks: range) -> None:
            # buffers per thread, reused block after block (no allocation per word); the counts
            # of up to 3 words (<= 192) are summed in uint8, which numpy adds fastest, and each
            # group of 3 is then added into the uint16 distance
            m = min(n, SCAN_BLOCK)
            xor, ones = np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.uint8)
            group = np.empty(m, dtype=np.uint8)
            for lo in blocks:
                hi = min(n, lo + SCAN_BLOCK)
                acc, x, c, g = dist[lo:hi], xor[: hi - lo], ones[: hi - lo], group[: hi - lo]
                for w in range(words):
                    np.bitwise_xor(bits[w, lo:hi], q[w], out=x)
                    _popcount_into(x, g if w % 3 == 0 else c)
                    if w % 3:
                        np.add(g, c, out=g)
                    if w % 3 == 2 or w == words - 1:
                        if w < 3:
                            np.copyto(acc, g)
                        else:
                            np.add(acc, g, out=acc)

        starts = range(0, n, SCAN_BLOCK)
        if threads > 1 and len(starts) >= 4:  # numpy releases the GIL: a second thread scans
            # every other block
            other = _scan_pool().submit(scan, starts[1::2])
            scan(starts[0::2])
            other.result()
        else:
            scan(starts)
        if n <= count:
            return np.arange(n)
        return _cut(dist, count, words * 64)

    def nearest(self, query: NDArray[np.float32], k: int, exclude: set[int] | None = None, *,
                threads: int = 2) -> list[tuple[int, float]]:
        """The ``k`` most similar messages as (id, cosine), best first (ties: newest first).
        ``threads``: 1 when another search runs beside this one (a word search holding a core:
        a second scan thread would only slow it down)."""
        n, ids, bits, q8, scale = self._snapshot()
        if not n:
            return []
        query = np.asarray(query, dtype=np.float32)
        want = max(self.rescore, 2 * k) + (len(exclude) if exclude else 0)
        pos = self._closest(query, want, bits, threads)
        if exclude:
            pos = pos[~np.isin(ids[pos], np.fromiter(exclude, dtype=np.int64,
                                                      count=len(exclude)))]
        if not len(pos):
            return []
        if self.in_memory:  # rescoring: one gather and one product over the pool
            sims = (q8[pos].astype(np.float32) @ query) * scale[pos]
            found = ids[pos]
        else:
            exact = self.similarities(query, ids[pos].tolist())
            found = np.fromiter(exact, dtype=np.int64, count=len(exact))
            sims = np.fromiter(exact.values(), dtype=np.float32, count=len(exact))
        if len(sims) > k:  # the k best, then ordered: best first, the newer of a tie first
            top = np.argpartition(-sims, k - 1)[:k]
            found, sims = found[top], sims[top]
        order = np.lexsort((-found, -sims))
        return list(zip(found[order].tolist(), sims[order].tolist(), strict=True))


def _popcount_into(x: NDArray[np.uint64], out: NDArray[np.uint8]) -> None:
    if hasattr(np, "bitwise_count"):
        np.bitwise_count(x, out=out)
    else:
        np.copyto(out, _popcount(x))


def _cut(dist: NDArray[np.uint16], count: int, bits: int) -> NDArray[np.intp]:
    """Positions of the rows at distance <= the ``count``-th smallest (ties included), as the
    exact histogram gives them. The cut-off is first estimated from a histogram of every 8th row
    (a histogram of a million rows costs a third of the scan) and kept when it is the exact one
    (at least ``count`` rows at or below it, fewer below it); else the full histogram decides."""
    n = len(dist)
    if n >= 64 * count:
        sampled = np.cumsum(np.bincount(dist[::8], minlength=bits + 1))
        cut = int(np.searchsorted(sampled, -(-count // 8)))
        pos = np.flatnonzero(dist <= cut)
        if len(pos) >= count and (cut == 0 or int(np.count_nonzero(dist < cut)) < count):
            return pos  # the same rows as the exact cut-off: enough, and fewer below it
    cumulative = np.cumsum(np.bincount(dist, minlength=bits + 1))
    return np.flatnonzero(dist <= int(np.searchsorted(cumulative, count)))


_POOL: Any = None
_POOL_LOCK = threading.Lock()


def _scan_pool() -> Any:
    """One thread kept for the second half of the scans (no thread started per query)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="archive-vector-scan")
        return _POOL


#: messages looked at per wake-up by the indexer's sweep for late commits (PostgreSQL)
SWEEP_WINDOW = 5000
#: how long the indexer sleeps without a wake-up (after an outage: when it tries again)
RETRY_SECONDS = 30.0


class VectorIndexer:
    """A daemon thread that embeds new messages in the background; :meth:`wake` after appends.

    A failing database (a restart, a failover) pauses it: it records :attr:`error`, logs it
    once, and tries again at the next :meth:`wake` or after :data:`RETRY_SECONDS`; nothing
    pending is skipped (the cursor only moves with stored vectors)."""

    def __init__(self, archive: SessionArchive, embedder: GuardedEmbedder, *,
                 batch: int = 32) -> None:
        self.archive = archive
        self.embedder = embedder
        self.batch = batch
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.idle = threading.Event()
        self.error: str | None = None
        self._swept = 0  # where the sweep for messages below the cursor goes on (see below)
        self._thread = threading.Thread(target=self._run, name="archive-vectors", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self.idle.clear()
        self._wake.set()

    def wait_done(self, timeout: float) -> bool:
        """Wake the indexer and wait until it has nothing pending (False after ``timeout`` s, or
        when it is paused by a failing embedder or stopped)."""
        deadline = time.monotonic() + timeout
        while True:
            self.wake()
            if not self.idle.wait(max(0.0, deadline - time.monotonic())):
                return False
            if self.error is None and not has_pending(self.archive):
                return True
            if self.error is not None or time.monotonic() >= deadline:
                return False

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=RETRY_SECONDS)
            self._wake.clear()
            while not self._stop.is_set():
                if not self.embedder.ready():
                    self._stop.wait(5)
                    continue
                try:
                    if state(self.archive, self.embedder, count=False).problem:
                        break  # another model's vectors: reindex is required, say so on search
                    n = index_batch(self.archive, self.embedder, self.batch)
                    self.error = None
                    if n == BUSY:  # another node of the database is embedding: let it
                        self._stop.wait(1.0)
                        continue
                except EmbeddingError as exc:
                    self.error = str(exc)
                    continue
                except Exception as exc:  # the database is unreachable (an outage): pause
                    error = f"{type(exc).__name__}: {exc}"
                    if error != self.error:  # once per distinct failure, not once per retry
                        log.warning("vector indexer paused: %s; it tries again at the next "
                                    "stored message or in %.0f s", error, RETRY_SECONDS)
                    self.error = error
                    break
                if n == 0 and not self._sweep_step():
                    break
            self.idle.set()

    def _sweep_step(self) -> int:
        """On a shared database, look for messages without a vector among the next
        :data:`SWEEP_WINDOW` messages (from the first on, round and round): a transaction
        that committed long after its ids were given (an import, a stalled node) can leave
        messages below the cursor's look-back, which the pending query no longer sees. One
        window per wake-up while nothing else is pending; how many it embedded."""
        store = vector_store(self.archive)
        if not store.shared:
            return 0
        after = self._swept
        upto = store.id_after(after, SWEEP_WINDOW)  # None: the window reaches the end
        out = store.exclusive(functools.partial(
            _fill, store, embedder=self.embedder, size=self.batch, after=after, upto=upto),
            None)
        if out is None:  # another node is embedding
            return 0
        n, last = out
        if n:
            self._swept = last
        else:
            self._swept = upto or 0  # at the end: the whole archive was looked at, again
        return n

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)


def lineage_ids(archive: SessionArchive, session_id: str) -> set[int]:
    from .store import LINEAGE_CTE

    return {r[0] for r in archive.db.read(
        LINEAGE_CTE + "SELECT id FROM messages WHERE session IN (SELECT num FROM lineage)",
        {"sid": session_id})}

