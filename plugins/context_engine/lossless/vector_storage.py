"""Where :class:`~.vectors.SpanVectors` keeps vectors: the ``span_vectors`` table beside the
archive's messages (``lossless_span_vectors`` in the ``storage.url`` database, migration 2 of
the ``lossless`` component), one vector per message (:mod:`hermes_core.storage.vectors`) with its
model id and text hash.

Written once over the archive's :class:`~hermes_core.storage.dialect.Database`. Several nodes
may run the indexer on one database: each writes with ``ON CONFLICT DO UPDATE``, so a vector
computed twice is simply written twice (the same model gives the same vector), and a message
forgotten between reading and writing is skipped, never an error. A search reads the
conversation's vectors with one query; the cosine is computed in the process (numpy).
"""

from __future__ import annotations

from typing import Any

from hermes_core.storage.dialect import SqliteDatabase
from hermes_core.storage.vectors import upsert_sql

from .records import SearchHit, snippet

__all__ = ["SpanVectorStorage"]

#: the table in a SQLite archive, made on first use (the database's comes with its migrations)
_SQLITE_VECTORS = """
CREATE TABLE IF NOT EXISTS span_vectors (
    message_id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vec BLOB NOT NULL
);
"""


class SpanVectorStorage:
    """The vectors of one archive (``store``: a :class:`~.store.Spans`), next to its messages;
    safe to share between threads. A SQLite archive's indexer has a connection of its own, so it
    never waits for the engine's. Vectors are :mod:`hermes_core.storage.vectors` bytes; an empty
    one marks a message with no text (never compared, never retried)."""

    def __init__(self, store: Any) -> None:
        self.path = store.path
        self.p = store.prefix
        self.words = store.words
        self._own = isinstance(store.db, SqliteDatabase)
        self.db = SqliteDatabase(store.path, schema=_SQLITE_VECTORS, wal=False) if self._own else store.db

    def close(self) -> None:
        if self._own:
            self.db.close()

    def unembedded(self, model: str, limit: int) -> list[tuple[int, str, str | None]]:
        """Up to ``limit`` messages without a vector of ``model``: (id, content, tool calls)."""
        rows = self.db.fetch(
            f"SELECT m.id, m.content, m.tool_calls FROM {self.p}span_messages m "
            f"LEFT JOIN {self.p}span_vectors v ON v.message_id = m.id "
            "WHERE v.message_id IS NULL OR v.model <> ? ORDER BY m.id LIMIT ?", (model, limit))
        out = self.db.text_out
        return [(int(i), out(c), out(t) if t is not None else None) for i, c, t in rows]

    def put(self, model: str, rows: list[tuple[int, str, bytes]]) -> None:
        """Write (message id, text hash, vector) rows, replacing any older vector; rows of
        messages no longer archived are skipped; writing one twice is not an error."""
        if not rows:
            return
        with self.db.transaction() as con:
            # only messages still archived (a forget may have run since they were read)
            self.db.executemany(con, upsert_sql(
                f"{self.p}span_vectors", f"{self.p}span_messages", key="message_id"),
                [(mid, model, key, vec, mid) for mid, key, vec in rows])

    def conversation_rows(self, conversation: str) -> list[tuple[int, int, str, str, bytes]]:
        """(span id, position in the span, model, text hash, vector) of every vector of the
        conversation's messages (``storage migrate`` copies them by position)."""
        rows = self.db.fetch(
            f"SELECT m.span_id, m.seq, v.model, v.text_hash, v.vec FROM {self.p}span_messages m "
            f"JOIN {self.p}spans s ON s.id = m.span_id JOIN {self.p}span_vectors v "
            "ON v.message_id = m.id WHERE s.conversation = ? ORDER BY m.id", (conversation,),
            binary=True)
        return [(int(a), int(b), str(model), str(key), bytes(vec)) for a, b, model, key, vec in rows]

    def put_at(self, model: str, rows: list[tuple[int, int, str, bytes]]) -> None:
        """Write (span id, position, text hash, vector) rows to the message at that position,
        replacing any vector it has (what :meth:`put` does by message id); a row naming no
        message is skipped."""
        if not rows:
            return
        with self.db.transaction() as con:
            self.db.executemany(con, (
                f"INSERT INTO {self.p}span_vectors(message_id, model, text_hash, vec) "
                f"SELECT m.id, ?, ?, ? FROM {self.p}span_messages m WHERE m.span_id = ? AND "
                "m.seq = ? ON CONFLICT (message_id) DO UPDATE SET model = excluded.model, "
                "text_hash = excluded.text_hash, vec = excluded.vec"),
                [(model, key, vec, span, seq) for span, seq, key, vec in rows])

    def prune(self) -> int:
        """Vectors of forgotten messages (the database deletes them with their message)."""
        return self.db.execute(
            f"DELETE FROM {self.p}span_vectors WHERE NOT EXISTS (SELECT 1 FROM "
            f"{self.p}span_messages m WHERE m.id = {self.p}span_vectors.message_id)", retry=True)

    def pending(self, model: str) -> int:
        """Archived messages without a vector of ``model``."""
        (row,) = self.db.fetch(
            f"SELECT count(*) FROM {self.p}span_messages m LEFT JOIN {self.p}span_vectors v "
            "ON v.message_id = m.id WHERE v.message_id IS NULL OR v.model <> ?", (model,))
        return int(row[0])

    def vectors(self, conversation: str, model: str) -> tuple[list[tuple[int, bytes]], int]:
        """(message id, vector) of every non-empty ``model`` vector of the conversation, and
        how many of its messages have no ``model`` vector yet (one query)."""
        rows = self.db.fetch(
            f"SELECT m.id, v.vec FROM {self.p}span_messages m JOIN {self.p}spans s "
            f"ON s.id = m.span_id LEFT JOIN {self.p}span_vectors v ON v.message_id = m.id "
            "AND v.model = ? WHERE s.conversation = ?", (model, conversation), binary=True)
        missing = sum(1 for _i, b in rows if b is None)
        return [(int(i), bytes(b)) for i, b in rows if b], missing

    def lexical(self, conversation: str, terms: list[str], limit: int
                ) -> tuple[dict[int, float], str]:
        """The word match of :meth:`.store.Spans.search` (every word, else any word), as
        message id -> word score (higher is better)."""
        if not terms:
            return {}, "none"
        from .store import match_words

        rows, how = match_words(self.db, self.p, self.words, conversation, terms, limit,
                                "m.id, {rank}")
        return {int(i): float(score) for i, score in rows}, how

    def hits(self, ids: list[int], terms: list[str]) -> dict[int, SearchHit]:
        """message id -> its hit (span, seq, role, snippet around ``terms``, time)."""
        if not ids:
            return {}
        where, params = self.db.any_of("id", ids)
        rows = self.db.fetch("SELECT id, span_id, seq, role, content, tool_calls, timestamp "
                             f"FROM {self.p}span_messages WHERE {where}", params)
        out = self.db.text_out
        return {int(mid): SearchHit(int(span), int(seq), role,
                                    snippet(out(content) + " " + (out(calls) if calls else ""),
                                            terms), ts)
                for mid, span, seq, role, content, calls, ts in rows}
