"""The lossless engine's archive: compacted spans of messages in a small SQLite file.

Each compaction stores the messages it takes out of the live context as one *span*, verbatim,
with a short digest. A contentless FTS5 index (no second copy of the text) makes them searchable;
reads come from the ``span_messages`` table itself.

Spans belong to a *conversation*: the root of a lineage of sessions (a compaction's child session
continues its parent's conversation). The engine only ever searches or expands spans of the
conversation it serves, so two users of one webhook never see each other's turns.

This store is the engine's own (``$HERMES_CORE_HOME/context.db`` by default), independent of the
session archive plugin: the engine works whichever memory providers are active.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_core.private import private_sqlite
from hermes_core.types import Message, ToolCall

from .records import SearchHit, Span, StoredMessage, calls_json, fts_terms, snippet

__all__ = ["SpanStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
    id INTEGER PRIMARY KEY,
    conversation TEXT NOT NULL,
    created_at REAL NOT NULL,
    first_ts REAL,
    last_ts REAL,
    n_messages INTEGER NOT NULL,
    digest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_by_conversation ON spans(conversation, id);
CREATE TABLE IF NOT EXISTS span_messages (
    id INTEGER PRIMARY KEY,
    span_id INTEGER NOT NULL REFERENCES spans(id),
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    timestamp REAL,
    UNIQUE (span_id, seq)
);
CREATE VIRTUAL TABLE IF NOT EXISTS span_fts USING fts5(
    text, content='', tokenize='unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS conversations (
    session_id TEXT PRIMARY KEY,
    root TEXT NOT NULL
);
"""

class SpanStore:
    """Spans in one SQLite file; safe to share between threads (one connection, one lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        private_sqlite(path)  # 0600, and so its -wal/-shm
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def vector_storage(self) -> Any:
        """Where semantic search keeps this archive's vectors (:mod:`.sqlite_vectors`)."""
        from .sqlite_vectors import SqliteVectorStorage

        return SqliteVectorStorage(self.path)

    def count_vectors(self) -> int:
        """Message vectors stored (any model; 0 before semantic search first ran)."""
        with self._lock:
            if not self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                                    "AND name = 'span_vectors'").fetchone():
                return 0
            return int(self._db.execute("SELECT count(*) FROM span_vectors").fetchone()[0])

    # --------------------------------------------------------------------------- lineage

    def root_of(self, session_id: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT root FROM conversations WHERE session_id = ?", (session_id,)
            ).fetchone()
        return str(row[0]) if row else None

    def link(self, session_id: str, root: str) -> None:
        """Record that ``session_id`` belongs to the conversation ``root``."""
        with self._lock:
            self._db.execute(
                "INSERT INTO conversations(session_id, root) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET root = excluded.root",
                (session_id, root),
            )

    # ----------------------------------------------------------------------------- writes

    def add_span(self, conversation: str, messages: Sequence[Message], digest: str) -> Span:
        """Store ``messages`` as a new span, in one transaction (all or nothing)."""
        now = time.time()
        first = messages[0].timestamp if messages else None
        last = messages[-1].timestamp if messages else None
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                cur = self._db.execute(
                    "INSERT INTO spans(conversation, created_at, first_ts, last_ts, n_messages, digest)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (conversation, now, first, last, len(messages), digest),
                )
                span_id = int(cur.lastrowid or 0)
                for seq, message in enumerate(messages):
                    calls = calls_json(message) if message.tool_calls else None
                    cur = self._db.execute(
                        "INSERT INTO span_messages(span_id, seq, role, content, tool_calls, "
                        "tool_call_id, tool_name, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            span_id,
                            seq,
                            message.role,
                            message.content,
                            calls,
                            message.tool_call_id,
                            message.tool_name,
                            message.timestamp,
                        ),
                    )
                    text = message.content
                    if message.tool_calls:
                        text += " " + " ".join(
                            f"{c.name} {json.dumps(c.arguments, ensure_ascii=False, default=str)}"
                            for c in message.tool_calls
                        )
                    self._db.execute(
                        "INSERT INTO span_fts(rowid, text) VALUES (?, ?)", (cur.lastrowid, text)
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return Span(span_id, conversation, now, first, last, len(messages), digest)

    # ------------------------------------------------------------------------------ reads

    def spans(self, conversation: str, *, limit: int | None = None) -> list[Span]:
        """The conversation's spans, oldest first (the newest ``limit`` when given)."""
        sql = (
            "SELECT id, conversation, created_at, first_ts, last_ts, n_messages, digest FROM spans "
            "WHERE conversation = ? ORDER BY id DESC"
        )
        params: tuple[object, ...] = (conversation,)
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [Span(*row) for row in reversed(rows)]

    def count_spans(self, conversation: str) -> int:
        with self._lock:
            row = self._db.execute(
                "SELECT count(*) FROM spans WHERE conversation = ?", (conversation,)
            ).fetchone()
        return int(row[0])

    def span(self, span_id: int) -> Span | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, conversation, created_at, first_ts, last_ts, n_messages, digest "
                "FROM spans WHERE id = ?",
                (span_id,),
            ).fetchone()
        return Span(*row) if row else None

    def messages(self, span_id: int, start: int = 0, count: int = 50) -> list[StoredMessage]:
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, role, content, tool_calls, tool_call_id, tool_name, timestamp "
                "FROM span_messages WHERE span_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
                (span_id, start, count),
            ).fetchall()
        out = []
        for seq, role, content, calls, call_id, tool_name, ts in rows:
            tool_calls = [
                ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or {})
                for c in json.loads(calls or "[]")
            ]
            message = Message(
                role=role,
                content=content,
                tool_calls=tool_calls,
                tool_call_id=call_id,
                tool_name=tool_name,
                timestamp=ts if ts is not None else 0.0,
            )
            out.append(StoredMessage(span_id, int(seq), message))
        return out

    def search(self, conversation: str, query: str, *, limit: int = 8) -> list[SearchHit]:
        """Messages of the conversation's spans matching ``query``, best first.

        All words must match; when nothing does, any word may (so a natural-language question
        still finds something). Never raises for punctuation in ``query``.
        """
        terms = fts_terms(query)
        if not terms:
            return []
        quoted = [f'"{t}"' for t in terms]
        for expression in (" ".join(quoted), " OR ".join(quoted)):
            with self._lock:
                rows = self._db.execute(
                    "SELECT m.span_id, m.seq, m.role, m.content, m.tool_calls, m.timestamp "
                    "FROM span_fts JOIN span_messages m ON m.id = span_fts.rowid "
                    "JOIN spans s ON s.id = m.span_id "
                    "WHERE span_fts MATCH ? AND s.conversation = ? ORDER BY bm25(span_fts) LIMIT ?",
                    (expression, conversation, limit),
                ).fetchall()
            if rows or len(terms) == 1:
                break
        return [
            SearchHit(int(span), int(seq), role, snippet(content + " " + (calls or ""), terms), ts)
            for span, seq, role, content, calls, ts in rows
        ]

    # ----------------------------------------------------------------------------- forget

    def forget(self, subject: str, *, dry_run: bool = False) -> tuple[list[tuple[int, int]], int]:
        """Delete archived messages mentioning ``subject`` (case and whitespace ignored).

        Returns ((span id, seq) of each match, digests cleared). In one transaction: each row
        leaves ``span_messages`` and the contentless index (which needs the indexed text back,
        rebuilt exactly as :meth:`add_span` built it); a span digest that mentions the subject is
        replaced by a neutral note.
        """
        needle = " ".join(subject.split()).casefold()
        with self._lock:
            rows = self._db.execute(
                "SELECT id, span_id, seq, content, tool_calls FROM span_messages").fetchall()
            hits = [r for r in rows
                    if needle in " ".join((r[3] + " " + (r[4] or "")).split()).casefold()]
            digests = [d[0] for d in self._db.execute("SELECT id, digest FROM spans")
                       if needle in " ".join(d[1].split()).casefold()]
            if dry_run or (not hits and not digests):
                return [(r[1], r[2]) for r in hits], len(digests)
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for rowid, _span, _seq, content, calls in hits:
                    text = content
                    parsed = json.loads(calls) if calls else []
                    if parsed:
                        text += " " + " ".join(
                            f"{c['name']} "
                            f"{json.dumps(c.get('arguments') or {}, ensure_ascii=False, default=str)}"
                            for c in parsed
                        )
                    self._db.execute("INSERT INTO span_fts(span_fts, rowid, text) "
                                     "VALUES ('delete', ?, ?)", (rowid, text))
                    self._db.execute("DELETE FROM span_messages WHERE id = ?", (rowid,))
                for span_id in digests:
                    self._db.execute("UPDATE spans SET digest = ? WHERE id = ?",
                                     ("(digest removed: it mentioned a forgotten subject)",
                                      span_id))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return [(r[1], r[2]) for r in hits], len(digests)
