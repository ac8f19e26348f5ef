"""Message vectors beside the text: storage, the in-memory matrix, and the background indexer.

What is embedded: the content of user and assistant messages that are searchable (not copies a
compaction carried over, not the search tools' echoes), cut to its first :data:`TEXT_CHARS`
characters (the model reads 256 tokens anyway). Tool outputs are left to word search.

Storage: table ``message_vectors`` (schema version 2): one float16 row per message, 768 bytes for
384 dimensions. ``meta`` holds the model id and dimension the vectors were made with, and
``vectors_through``, the id up to which every message was considered (the indexer's cursor), so
indexing resumes where it stopped and never rereads the archive.

Search: the vectors are read once into a float32 matrix (1.5 KB of memory per message) and then
only the rows added since; a query is one matrix-vector product (brute force, exact).

The indexer is a daemon thread per archive, woken when messages are appended; it embeds in
batches through the guarded embedder and never holds a turn (the append path only sets an event).
A failing embedder pauses it; nothing is lost, the cursor stays where it was.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes_core.embeddings import EmbeddingError, GuardedEmbedder

from .schema import INDEXED_SQL
from .store import SessionArchive

__all__ = ["TEXT_CHARS", "VectorIndex", "VectorIndexer", "VectorState", "reindex"]

log = logging.getLogger("hermes_core.plugins.session_archive")

TEXT_CHARS = 2000
_ROLES = ("user", "assistant")
_ECHO = ("session_search", "context_search")
_PENDING = (
    "SELECT m.id, substr(m.content, 1, {chars}) FROM messages AS m WHERE m.id > ? "
    "AND m.role IN ('user', 'assistant') AND length(m.content) > 0 AND " + INDEXED_SQL + " "
    "AND NOT (m.tool_calls IS NOT NULL AND length(m.content) <= 300 AND ("
    + " OR ".join(f"m.tool_calls LIKE '%\"name\":\"{t}\"%'" for t in _ECHO) + ")) "
    "ORDER BY m.id LIMIT ?"
)


@dataclass
class VectorState:
    """What the stored vectors are, and whether they fit the current embedder."""

    model: str | None
    dimension: int
    through: int
    count: int
    #: None when usable with the current embedder; else what is wrong and what to run
    problem: str | None = None


def _meta(archive: SessionArchive, key: str) -> str | None:
    rows = archive.db.read("SELECT value FROM meta WHERE key = ?", (key,))
    return str(rows[0][0]) if rows else None


def _set_meta(con: sqlite3.Connection, key: str, value: str) -> None:
    con.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                "value = excluded.value", (key, value))


def state(archive: SessionArchive, embedder: GuardedEmbedder | None, *,
          count: bool = True) -> VectorState:
    """The stored vectors' model, cursor and (with ``count``: a table scan) how many there are.

    Without ``count`` (the per-query check), ``count`` is 1 when there are any, else 0.
    """
    model = _meta(archive, "vectors_model")
    dim = int(_meta(archive, "vectors_dimension") or 0)
    through = int(_meta(archive, "vectors_through") or 0)
    sql = ("SELECT count(*) FROM message_vectors" if count else
           "SELECT EXISTS (SELECT 1 FROM message_vectors)")
    n = int(archive.db.read(sql)[0][0])
    st = VectorState(model, dim, through, n)
    if embedder is not None and model is not None and n and (
            model != embedder.model_id or dim != embedder.dimension):
        st.problem = (f"the archive's vectors were made by {model} ({dim} dimensions) and the "
                      f"embedder is now {embedder.model_id} ({embedder.dimension}); run "
                      "'hermes-core sessions reindex' to rebuild them (word search works "
                      "meanwhile)")
    return st


def _claim(archive: SessionArchive, embedder: GuardedEmbedder) -> bool:
    """Record the model on an archive without vectors; False when another model's are there."""

    def tx(con: sqlite3.Connection) -> bool:
        row = con.execute("SELECT value FROM meta WHERE key = 'vectors_model'").fetchone()
        if row is not None and row[0] != embedder.model_id and con.execute(
                "SELECT 1 FROM message_vectors LIMIT 1").fetchone():
            return False
        _set_meta(con, "vectors_model", embedder.model_id)
        _set_meta(con, "vectors_dimension", str(embedder.dimension))
        return True

    return bool(archive.db.write(tx))


def index_batch(archive: SessionArchive, embedder: GuardedEmbedder, size: int = 32) -> int:
    """Embed the next ``size`` pending messages; return how many were considered (0: done).

    Raises EmbeddingError when the embedder fails (the cursor does not move: nothing is lost).
    """
    if not _claim(archive, embedder):
        return 0
    through = int(_meta(archive, "vectors_through") or 0)
    rows = archive.db.read(_PENDING.format(chars=TEXT_CHARS), (through, size))
    if not rows:
        return 0
    vectors = np.asarray(embedder.embed([r[1] for r in rows]), dtype=np.float32)
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingError(f"embedder {embedder.name} returned NaN or infinite values")
    blobs = [(r[0], vectors[i].astype(np.float16).tobytes()) for i, r in enumerate(rows)]
    last = rows[-1][0]

    def tx(con: sqlite3.Connection) -> None:
        # a message deleted meanwhile gets no vector (its id no longer exists)
        con.executemany("INSERT OR REPLACE INTO message_vectors(id, vec) SELECT ?, ? WHERE "
                        "EXISTS (SELECT 1 FROM messages WHERE id = ?)",
                        [(i, b, i) for i, b in blobs])
        _set_meta(con, "vectors_through", str(last))

    archive.db.write(tx)
    return len(rows)


def pending(archive: SessionArchive) -> int:
    through = int(_meta(archive, "vectors_through") or 0)
    return int(archive.db.read(
        "SELECT count(*) FROM messages AS m WHERE m.id > ? AND m.role IN ('user', 'assistant') "
        f"AND length(m.content) > 0 AND {INDEXED_SQL}", (through,))[0][0])


def reindex(archive: SessionArchive, embedder: GuardedEmbedder, *, batch: int = 32,
            progress: Callable[[int, int], None] | None = None, rebuild: bool = False) -> int:
    """Embed every pending message (all of them with ``rebuild``, after dropping the old
    vectors); ``progress(done, total)`` after each batch. Returns the messages embedded."""
    if rebuild or state(archive, embedder, count=False).problem:
        def tx(con: sqlite3.Connection) -> None:
            con.execute("DELETE FROM message_vectors")
            for key in ("vectors_model", "vectors_dimension", "vectors_through"):
                con.execute("DELETE FROM meta WHERE key = ?", (key,))

        archive.db.write(tx)
    total = pending(archive)
    done = 0
    while True:
        n = index_batch(archive, embedder, batch)
        if n == 0:
            break
        done += n
        if progress is not None:
            progress(min(done, total), total)
    return done


class VectorIndex:
    """The archive's vectors as one float32 matrix in memory, refreshed incrementally."""

    def __init__(self, archive: SessionArchive) -> None:
        self.archive = archive
        self._lock = threading.Lock()
        self.ids: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.matrix: NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self._loaded_through = 0
        self._model: str | None = None

    def refresh(self, dimension: int) -> None:
        with self._lock:
            model = _meta(self.archive, "vectors_model")
            if model != self._model or self.matrix.shape[1:] != (dimension,):
                self.ids = np.zeros(0, dtype=np.int64)
                self.matrix = np.zeros((0, dimension), dtype=np.float32)
                self._loaded_through, self._model = 0, model
            rows = self.archive.db.read(
                "SELECT id, vec FROM message_vectors WHERE id > ? ORDER BY id",
                (self._loaded_through,))
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16)
            if vecs.size != len(rows) * dimension:
                return  # another model's vectors: state() reports it
            self.ids = np.concatenate([self.ids, ids])
            self.matrix = np.concatenate([self.matrix, vecs.reshape(len(rows), dimension)
                                          .astype(np.float32)])
            self._loaded_through = int(ids[-1])

    def nearest(self, query: NDArray[np.float32], k: int,
                exclude: set[int] | None = None) -> list[tuple[int, float]]:
        """The ``k`` most similar messages as (id, cosine), best first."""
        with self._lock:
            ids, matrix = self.ids, self.matrix
        if not len(ids):
            return []
        sims = matrix @ query
        if exclude:
            mask = np.isin(ids, np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
            sims = np.where(mask, -2.0, sims)
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top])]
        return [(int(ids[i]), float(sims[i])) for i in top if sims[i] > -2.0]


class VectorIndexer:
    """A daemon thread that embeds new messages in the background; :meth:`wake` after appends."""

    def __init__(self, archive: SessionArchive, embedder: GuardedEmbedder, *,
                 batch: int = 32) -> None:
        self.archive = archive
        self.embedder = embedder
        self.batch = batch
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.idle = threading.Event()
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="archive-vectors", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self.idle.clear()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=30)
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
                except EmbeddingError as exc:
                    self.error = str(exc)
                    continue
                except Exception as exc:  # a closed or broken archive: stop quietly
                    self.error = f"{type(exc).__name__}: {exc}"
                    log.warning("vector indexer stopped: %s", self.error)
                    return
                if n == 0:
                    break
            self.idle.set()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)


def role_filter(archive: SessionArchive, ids: list[int], roles: tuple[str, ...]) -> set[int]:
    """The ids among ``ids`` whose role is in ``roles``."""
    if not ids:
        return set()
    out: set[int] = set()
    for i in range(0, len(ids), 900):
        part = ids[i:i + 900]
        out |= {r[0] for r in archive.db.read(
            f"SELECT id FROM messages WHERE id IN ({','.join('?' * len(part))}) AND role IN "
            f"({','.join('?' * len(roles))})", (*part, *roles))}
    return out


def lineage_ids(archive: SessionArchive, session_id: str) -> set[int]:
    from .store import LINEAGE_CTE

    return {r[0] for r in archive.db.read(
        LINEAGE_CTE + "SELECT id FROM messages WHERE session IN (SELECT num FROM lineage)",
        {"sid": session_id})}

