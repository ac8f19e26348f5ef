"""Message vectors beside the text: what is embedded, the background indexer and reindex.

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

Search (:class:`~.vector_index.VectorIndex`, in vector_index.py): the sign bit
of each dimension is kept in memory (48 bytes per message for 384 dimensions); a query scans every
row's Hamming distance to its own sign bits, then ranks the closest few hundred by the exact cosine
of their stored float16 vectors.

The indexer is a daemon thread per archive (:class:`hermes_core.storage.vectors.Indexer`, the
thread every store's vectors are filled by), woken when messages are appended; it embeds in
batches through the guarded embedder and never holds a turn (the append path only sets an event),
nor shares the CPU with one: a batch starts only while no turn is in flight, and the embedder's
background lane runs it in small slices, each once turns have paused
(hermes_core.embeddings.turn_in_flight); without a pause, nothing is embedded (search finds the
newest messages by words until then). A failing embedder pauses it;
nothing is lost, the cursor stays where it was. ``storage migrate`` copies the vectors
(migrate.py), so the target has nothing to embed.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hermes_core.embeddings import EmbeddingError, GuardedEmbedder, wait_until_paused
from hermes_core.storage import vectors as stored_vectors

from .store import LINEAGE_CTE, SessionArchive
from .vector_store import BUSY, VectorStore, vector_store

__all__ = ["TEXT_CHARS", "VectorIndexer", "VectorState", "reindex"]

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


def index_batch(archive: SessionArchive, embedder: GuardedEmbedder, size: int = 32,
                stop: threading.Event | None = None) -> int:
    """Embed the next ``size`` pending messages; return how many were considered (0: done;
    :data:`~.vector_store.BUSY`: another node of a shared database is indexing).

    Raises EmbeddingError when the embedder fails (the cursor does not move: nothing is lost).
    """
    store = vector_store(archive)
    return store.exclusive(lambda con: _batch(store, con, embedder, size, stop), BUSY)


def _batch(store: VectorStore, con: Any, embedder: GuardedEmbedder, size: int,
           stop: threading.Event | None = None) -> int:
    if not _claim(store, con, embedder):
        return 0
    through = int(store.meta(con).get("vectors_through") or 0)
    rows = store.pending_rows(con, through, size, TEXT_CHARS)
    if not rows:
        return 0
    blobs = _blobs(embedder, rows, stop)
    last = max(through, int(rows[-1][0]))

    def tx(c: Any) -> None:
        store.put(c, blobs, TEXT_CHARS, embedder.model_id)
        # a message that took the id of one deleted meanwhile got no vector: stop before it
        unstored = store.unstored(c, [b[0] for b in blobs])
        store.set_meta(c, "vectors_through", str(min([last, *(i - 1 for i in unstored)])))

    store._write(con, tx)
    return len(rows)


def _blobs(embedder: GuardedEmbedder, rows: list[Any],
           stop: threading.Event | None = None) -> list[tuple[int, bytes, str]]:
    """(id, float16 vector, text) of each pending (id, text) row."""
    blobs = stored_vectors.embed_encoded(embedder, [r[1] for r in rows], stop=stop)
    return [(int(r[0]), blob, str(r[1])) for r, blob in zip(rows, blobs, strict=True)]


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
        store.put(c, blobs, TEXT_CHARS, embedder.model_id)
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
    return store.missing_count(store._after(int(store.meta().get("vectors_through") or 0)))


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


#: messages looked at per wake-up by the indexer's sweep for late commits (PostgreSQL)
SWEEP_WINDOW = 5000
#: how long the indexer sleeps without a wake-up (after an outage: when it tries again)
RETRY_SECONDS = 30.0


class VectorIndexer(stored_vectors.Indexer):
    """A daemon thread that embeds new messages in the background; :meth:`wake` after appends.

    A failing database (a restart, a failover) pauses it: it records :attr:`error`, logs it
    once, and tries again at the next :meth:`wake` or after :data:`RETRY_SECONDS`; nothing
    pending is skipped (the cursor only moves with stored vectors)."""

    retry = RETRY_SECONDS

    def __init__(self, archive: SessionArchive, embedder: GuardedEmbedder, *,
                 batch: int = 32) -> None:
        super().__init__("archive-vectors")
        self.archive = archive
        self.embedder = embedder
        self.batch = batch
        self.error: str | None = None
        self._swept = 0  # where the sweep for messages below the cursor goes on (see below)
        self.start()

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

    def step(self) -> float | None:
        if not self.embedder.ready():
            return 5.0
        # a batch starts only while no turn runs (its transaction on PostgreSQL is not held
        # open while turns run); each slice of its embedding waits again
        if not wait_until_paused(self.stopping):
            return None
        try:
            if state(self.archive, self.embedder, count=False).problem:
                return None  # another model's vectors: reindex is required, say so on search
            n = index_batch(self.archive, self.embedder, self.batch, self.stopping)
            self.error = None
            if n == BUSY:  # another node of the database is embedding: let it
                return 1.0
            if n == 0 and not self._sweep_step():
                return None
        except EmbeddingError as exc:
            self.error = str(exc)
        return 0.0

    def failed(self, exc: Exception) -> None:
        """The database is unreachable (an outage): pause until the next wake-up."""
        error = f"{type(exc).__name__}: {exc}"
        if error != self.error:  # once per distinct failure, not once per retry
            log.warning("vector indexer paused: %s; it tries again at the next "
                        "stored message or in %.0f s", error, RETRY_SECONDS)
        self.error = error

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
        self.stop(timeout)


def lineage_ids(archive: SessionArchive, session_id: str) -> set[int]:
    return {r[0] for r in archive.db.read(
        LINEAGE_CTE + "SELECT id FROM messages WHERE session IN (SELECT num FROM lineage)",
        {"sid": session_id})}

