"""Where :class:`~.vectors.SpanVectors` keeps vectors with the SQLite archive: the
``span_vectors`` table of ``context.db``, beside the spans (see :class:`~.vectors.VectorStorage`)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from .records import SearchHit, snippet

__all__ = ["SqliteVectorStorage"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS span_vectors (
    message_id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vec BLOB NOT NULL
);
"""


class SqliteVectorStorage:
    """Vectors in the archive file itself (its own connection; safe to share between threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def unembedded(self, model: str, limit: int) -> list[tuple[int, str, str | None]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT m.id, m.content, m.tool_calls FROM span_messages m "
                "LEFT JOIN span_vectors v ON v.message_id = m.id "
                "WHERE v.message_id IS NULL OR v.model != ? ORDER BY m.id LIMIT ?",
                (model, limit)).fetchall()
        return [(int(i), c, t) for i, c, t in rows]

    def put(self, model: str, rows: list[tuple[int, str, bytes]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # only messages still archived (a forget may have run since they were read)
                self._db.executemany(
                    "INSERT OR REPLACE INTO span_vectors(message_id, model, text_hash, vec) "
                    "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM span_messages WHERE id = ?)",
                    [(mid, model, key, vec, mid) for mid, key, vec in rows])
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def prune(self) -> int:
        with self._lock:
            cur = self._db.execute("DELETE FROM span_vectors WHERE message_id NOT IN "
                                   "(SELECT id FROM span_messages)")
        return int(cur.rowcount or 0)

    def pending(self, model: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM span_messages m LEFT JOIN span_vectors v "
                "ON v.message_id = m.id WHERE v.message_id IS NULL OR v.model != ?",
                (model,)).fetchone()
        return int(row[0])

    def vectors(self, conversation: str, model: str) -> tuple[list[tuple[int, bytes]], int]:
        with self._lock:
            rows = self._db.execute(
                "SELECT m.id, v.vec FROM span_messages m JOIN spans s ON s.id = m.span_id "
                "LEFT JOIN span_vectors v ON v.message_id = m.id AND v.model = ? "
                "WHERE s.conversation = ?", (model, conversation)).fetchall()
        missing = sum(1 for _i, b in rows if b is None)
        return [(int(i), bytes(b)) for i, b in rows if b], missing

    def lexical(self, conversation: str, terms: list[str], limit: int
                ) -> tuple[dict[int, float], str]:
        if not terms:
            return {}, "none"
        quoted = [f'"{t}"' for t in terms]
        for expression, how in ((" ".join(quoted), "all"), (" OR ".join(quoted), "any")):
            with self._lock:
                rows = self._db.execute(
                    "SELECT m.id, bm25(span_fts) FROM span_fts "
                    "JOIN span_messages m ON m.id = span_fts.rowid JOIN spans s ON s.id = m.span_id "
                    "WHERE span_fts MATCH ? AND s.conversation = ? ORDER BY bm25(span_fts) "
                    "LIMIT ?", (expression, conversation, limit)).fetchall()
            if rows:
                return {int(i): -float(score) for i, score in rows}, how
            if len(terms) == 1:
                break
        return {}, "none"

    def hits(self, ids: list[int], terms: list[str]) -> dict[int, SearchHit]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._db.execute(
                "SELECT id, span_id, seq, role, content, tool_calls, timestamp FROM span_messages "
                f"WHERE id IN ({marks})", ids).fetchall()
        return {int(mid): SearchHit(int(span), int(seq), role,
                                    snippet(content + " " + (calls or ""), terms), ts)
                for mid, span, seq, role, content, calls, ts in rows}
