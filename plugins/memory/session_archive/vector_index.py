"""The archive's vectors in memory, for search: sign bits to scan, int8 copies to rescore.

A query scans every row's Hamming distance to its own sign bits (an exhaustive scan, split in
two halves on two threads past a block size), keeps the closest few hundred, and ranks those by
the exact cosine of their stored vectors (see :class:`VectorIndex`). The vectors themselves are
written by vectors.py's indexer, through vector_store.py.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes_core.storage import vectors as stored_vectors

from .store import SessionArchive
from .vector_store import META_KEYS, vector_store

__all__ = ["RESCORE", "VectorIndex", "sign_bits"]

#: vectors read per statement while loading the index (the archive's lock is held per statement)
LOAD_CHUNK = 20_000
#: rows scanned per block of the sign-bit scan (keeps its temporary arrays small)
SCAN_BLOCK = 1 << 17
#: nearest candidates by sign bits that are rescored with their stored float16 vectors
RESCORE = 400
#: the meta key state.db's delete triggers count deleted messages in (schema.py)
CHANGES = "message_changes"

_POPCOUNT8 = None


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
        #: the archive's count of deleted messages (state.db) when the vectors were read: a
        #: deletion since reloads them (PostgreSQL has none: its ids are never given twice)
        self._changes: str | None = None
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
            meta = store.meta(keys=(*META_KEYS, CHANGES))
            model = (meta.get("vectors_model"), meta.get("vectors_epoch"))
            changes = meta.get(CHANGES)
            if model != self._model or dimension != self._dimension or (
                    changes != self._changes and self._changes is not None):
                # messages were deleted since the load (forget, sessions delete; maybe by
                # another process): their vectors go, and SQLite gives their ids to the next
                # messages, whose vectors sit below what was read: everything is read again
                self._reset(model, dimension)
            self._changes = changes
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
        # a row of another size is another model's: state() says so
        keep, vecs = stored_vectors.decode([r[1] for r in rows], dimension)
        if not keep:
            return
        good = [rows[i] for i in keep]
        ids = np.fromiter((r[0] for r in good), dtype=np.int64, count=len(good))
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
        rows = vector_store(self.archive).by_ids(list(ids))
        keep, vecs = stored_vectors.decode([r[1] for r in rows], self._dimension)
        return {int(rows[i][0]): vecs[k] for k, i in enumerate(keep)}

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
            other = kept_pool("archive-vector-scan", 1).submit(scan, starts[1::2])
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
    """Set bits per 64-bit word of ``x``, into ``out`` (numpy >= 2: one instruction per word;
    else a byte table)."""
    if hasattr(np, "bitwise_count"):
        np.bitwise_count(x, out=out)
        return
    global _POPCOUNT8
    if _POPCOUNT8 is None:
        _POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
    np.copyto(out, _POPCOUNT8[x.view(np.uint8)].reshape(*x.shape, 8).sum(-1, dtype=np.uint8))


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


_POOLS: dict[str, Any] = {}
_POOLS_LOCK = threading.Lock()


def kept_pool(prefix: str, workers: int) -> Any:
    """The threads kept for one part of the vector queries, made on first use: a thread started
    per query had glibc open a thread arena that stayed resident (issue 33), and cost a start on
    every search."""
    with _POOLS_LOCK:
        if prefix not in _POOLS:
            from concurrent.futures import ThreadPoolExecutor

            _POOLS[prefix] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=prefix)
        return _POOLS[prefix]
