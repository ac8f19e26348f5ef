"""Where an archive's message vectors are stored: the one small interface both backends offer.

:class:`VectorStore` is state.db's (tables ``message_vectors`` and ``meta``, schema version 3);
:class:`PgVectorStore` is the PostgreSQL archive's (``message_vectors`` and ``archive_meta``,
migration 4 of pg_schema.py). vectors.py (the indexer, reindex), vector_index.py (the in-memory index) and
hybrid.py (the fused search) reach the stored vectors only through :func:`vector_store`.

What differs on PostgreSQL:

* several nodes share the database, so one batch of the indexer (read its cursor, read the
  pending messages, embed them, store the vectors, move the cursor) runs in one transaction
  holding an advisory lock: only one node embeds at a time, and no message is embedded twice;
  a node that finds the lock taken leaves the work to the holder (:data:`BUSY`);
* message ids are allocated when a row is inserted and become visible when its transaction
  commits, so a message can appear *below* the cursor after the cursor passed it (two nodes
  appending at once). The pending query therefore looks :data:`LOOKBACK` ids behind the cursor
  for messages still without a vector;
* each vector row has ``seq``, the order vectors were committed in (writers are serialised by the
  lock), which is what every node's in-memory index follows to read only what is new, including
  the late vector of an older message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hermes_core.semantic import text_key
from hermes_core.storage.vectors import upsert_sql

from .schema import INDEXED_SQL
from .search import ECHO_CONTENT, calls_echo
from .store import SessionArchive

__all__ = ["BUSY", "LOOKBACK", "META_KEYS", "PgVectorStore", "VectorStore", "vector_store"]

T = TypeVar("T")

#: what index_batch returns when another node holds the indexing lock
BUSY = -1
#: ids behind the cursor still checked for a message without a vector (PostgreSQL)
LOOKBACK = 2000
#: the advisory lock of the archive's indexer (PostgreSQL): "hc-vecs" as a number
INDEXER_LOCK = 0x68632D76656373
META_KEYS = ("vectors_model", "vectors_dimension", "vectors_through", "vectors_epoch")
_EMBEDDABLE = (
    f"m.role IN ('user', 'assistant') AND length(m.content) > 0 AND {INDEXED_SQL} "
    f"AND NOT (m.tool_calls IS NOT NULL AND length(m.content) <= {ECHO_CONTENT} AND ("
    f"{calls_echo('m.tool_calls')}))"
)

# a message may have its vector already: copied by storage migrate, or stored by reindex
_MISSING = (f"m.id > ? AND {_EMBEDDABLE} AND NOT EXISTS (SELECT 1 FROM message_vectors AS v "
            "WHERE v.id = m.id)")


class VectorStore:
    """The vectors in state.db. Methods taking ``con`` run on that connection (inside the
    caller's transaction) when given, else on their own."""

    #: the key/value table holding the model, dimension, cursor and epoch
    meta_table = "meta"
    #: the column giving the order vectors were committed in
    order = "id"
    #: True when several processes index one database (PostgreSQL)
    shared = False

    def __init__(self, archive: SessionArchive) -> None:
        self.archive = archive

    # ------------------------------------------------------------------ plumbing

    def _read(self, con: Any, sql: str, params: Any = ()) -> list[Any]:
        if con is not None:
            return list(con.execute(sql, params).fetchall())
        return list(self.archive.db.read(sql, params))

    def _write(self, con: Any, fn: Callable[[Any], T]) -> T:
        return fn(con) if con is not None else self.archive.db.write(fn)

    def exclusive(self, fn: Callable[[Any], T], busy: T, *, wait: bool = False) -> T:
        """``fn(con)`` as the only indexer of the archive; ``busy`` when another one is at work
        (with ``wait``: once it is done). One process per state.db indexes it: ``fn(None)`` (its
        statements run on their own, so the embedding never holds the file's write lock)."""
        return fn(None)

    # ------------------------------------------------------------------ meta

    def meta(self, con: Any = None, *, exists: bool = False,
             keys: Sequence[str] = META_KEYS) -> dict[str, str]:
        """The ``keys`` of the meta table (default: the vectors'; and with ``exists``,
        ``"exists"``: "1" when any vector is stored), in one query."""
        names = ",".join(f"'{k}'" for k in keys)
        sql = f"SELECT key, value FROM {self.meta_table} WHERE key IN ({names})"
        if exists:
            sql += (" UNION ALL SELECT 'exists', CASE WHEN EXISTS (SELECT 1 FROM message_vectors)"
                    " THEN '1' ELSE '0' END")
        return {str(k): str(v) for k, v in self._read(con, sql)}

    def set_meta(self, con: Any, key: str, value: str | None) -> None:
        """Set ``key`` of the meta table (None: remove it), on ``con``."""
        if value is None:
            con.execute(f"DELETE FROM {self.meta_table} WHERE key = ?", (key,))
            return
        con.execute(f"INSERT INTO {self.meta_table}(key, value) VALUES (?, ?) ON CONFLICT(key) "
                    "DO UPDATE SET value = excluded.value", (key, value))

    def count(self) -> int:
        return int(self.archive.db.read("SELECT count(*) FROM message_vectors")[0][0])

    def any_vector(self, con: Any) -> bool:
        return bool(self._read(con, "SELECT 1 FROM message_vectors LIMIT 1"))

    def clear(self, con: Any) -> None:
        """Drop every vector and the model facts; the epoch moves on, so every loaded index
        (every node's) starts again."""
        epoch = self.meta(con).get("vectors_epoch", "0")
        con.execute("DELETE FROM message_vectors")
        for key in ("vectors_model", "vectors_dimension", "vectors_through"):
            self.set_meta(con, key, None)
        self.set_meta(con, "vectors_epoch", str(int(epoch) + 1))

    # ------------------------------------------------------------------ the indexer's queries

    def _after(self, through: int) -> int:
        return through

    def pending_rows(self, con: Any, through: int, size: int, chars: int) -> list[Any]:
        """(id, first ``chars`` characters) of the next ``size`` messages waiting for a vector."""
        return self.missing_rows(con, self._after(through), size, chars)

    def missing_rows(self, con: Any, after: int, size: int, chars: int,
                     upto: int | None = None) -> list[Any]:
        """(id, first ``chars`` characters) of the next ``size`` messages after id ``after``
        (up to id ``upto``) that have no vector, wherever the cursor is (``sessions reindex``
        and the indexer's sweep: every gap)."""
        bound = "" if upto is None else f" AND m.id <= {int(upto)}"
        return self._read(con, f"SELECT m.id, substr(m.content, 1, {int(chars)}) FROM messages "
                               f"AS m WHERE {_MISSING}{bound} ORDER BY m.id LIMIT ?",
                          (after, size))

    def id_after(self, after: int, count: int) -> int | None:
        """The id of the ``count``-th message after id ``after`` (None: there are fewer)."""
        rows = self._read(None, "SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 1 "
                                "OFFSET ?", (after, count - 1))
        return int(rows[0][0]) if rows else None

    def missing_count(self, after: int = 0) -> int:
        return int(self.archive.db.read(
            f"SELECT count(*) FROM messages AS m WHERE {_MISSING}", (after,))[0][0])

    def unstored(self, con: Any, ids: list[int]) -> list[int]:
        """Which of ``ids`` are messages without a vector (after :meth:`put`)."""
        if not ids:
            return []
        return [int(r[0]) for r in self._read(
            con, f"SELECT m.id FROM messages AS m WHERE m.id IN ({','.join('?' * len(ids))}) "
                 "AND NOT EXISTS (SELECT 1 FROM message_vectors AS v WHERE v.id = m.id)",
            tuple(ids))]

    def forgot(self, con: Any) -> None:
        """Messages were deleted (in ``con``'s transaction). SQLite gives the next message the
        id after the largest one left, so after the newest messages are deleted, new messages
        reuse ids the cursor has passed: move the cursor back to the largest id left."""
        con.execute(f"UPDATE {self.meta_table} SET value = CAST((SELECT coalesce(max(id), 0) "
                    "FROM messages) AS TEXT) WHERE key IN ('vectors_through', 'facts_through') AND "
                    "CAST(value AS INTEGER) > (SELECT coalesce(max(id), 0) FROM messages)")

    def put(self, con: Any, blobs: list[tuple[int, bytes, str]], chars: int, model: str) -> None:
        """Store each (id, vector, the text it was made from) of ``model``, with the text's hash:
        only where the message still holds that text, so a message deleted meanwhile gets no
        vector, nor does a new message that took its id (SQLite reuses the largest id after a
        delete)."""
        con.executemany(upsert_sql("message_vectors", "messages",
                                   item_condition=f"substr(content, 1, {int(chars)}) = ?"),
                        [(i, model, text_key(text), b, i, text) for i, b, text in blobs])

    # ------------------------------------------------------------------ the index's queries

    def since(self, after: int, limit: int) -> list[Any]:
        """(id, vec, position) of up to ``limit`` vectors committed after ``position``."""
        return self.archive.db.read(
            f"SELECT id, vec, {self.order} FROM message_vectors WHERE {self.order} > ? "
            f"ORDER BY {self.order} LIMIT ?", (after, limit))

    def by_ids(self, ids: list[int]) -> list[Any]:
        return self.archive.read_in("SELECT id, vec FROM message_vectors WHERE id IN ({marks})",
                                    ids)


class PgVectorStore(VectorStore):
    """The vectors in the PostgreSQL archive, shared by every node of the database."""

    meta_table = "archive_meta"
    order = "seq"
    shared = True

    def exclusive(self, fn: Callable[[Any], T], busy: T, *, wait: bool = False) -> T:
        """``fn(con)`` in one transaction holding the indexer's advisory lock (released at its
        end, also when the node dies); ``busy`` at once when another node holds it, unless
        ``wait``."""
        def tx(con: Any) -> T:
            if wait:
                con.execute("SELECT pg_advisory_xact_lock(?)", (INDEXER_LOCK,))
                return fn(con)
            got = con.execute("SELECT pg_try_advisory_xact_lock(?)", (INDEXER_LOCK,)).fetchone()
            return fn(con) if got and got[0] else busy

        return self.archive.db.write(tx)

    def forgot(self, con: Any) -> None:
        """Nothing to do: PostgreSQL never gives an id twice."""

    def put(self, con: Any, blobs: list[tuple[int, bytes, str]], chars: int, model: str) -> None:
        # ids are never given twice: a message still there is the one that was embedded
        con.executemany(upsert_sql("message_vectors", "messages"),
                        [(i, model, text_key(text), b, i) for i, b, text in blobs])

    def _after(self, through: int) -> int:
        return max(0, through - LOOKBACK)


def vector_store(archive: SessionArchive) -> VectorStore:
    """The vector storage of ``archive``'s backend."""
    if archive.backend == "postgresql":
        return PgVectorStore(archive)
    return VectorStore(archive)
