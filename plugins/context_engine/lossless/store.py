"""The lossless engine's archive: compacted spans of messages, in a SQLite file or the database.

Each compaction stores the messages it takes out of the live context as one *span*, verbatim,
with a short digest, in one transaction (all or nothing). A word index makes them searchable:
every word first, any word when nothing has them all, best first; reads come from the
``span_messages`` table itself.

Spans belong to a *conversation*: the root of a lineage of sessions (a compaction's child session
continues its parent's conversation). The engine only ever searches or expands spans of the
conversation it serves, so two users of one webhook never see each other's turns.

:class:`Spans` is the store, written once over a :class:`~hermes_core.storage.dialect.Database`.
Its backends differ only in their schema and the word index: :class:`SpanStore` here is the
engine's own SQLite file (``$HERMES_CORE_HOME/context.db`` by default: a contentless FTS5 index,
no second copy of the text), :class:`~.pg_store.PgSpanStore` the ``storage.url`` database
(``lossless_*`` tables, a ``tsvector`` column), used when ``storage.url`` is set (so every node
serving a conversation sees the spans any node archived). The store is independent of the
session archive plugin: the engine works whichever memory providers are active.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core.private import private_sqlite
from hermes_core.storage import resolve_storage_url
from hermes_core.storage.dialect import Database, SqliteDatabase
from hermes_core.storage.erasure_log import squash, strings
from hermes_core.types import Message, ToolCall

from .records import SearchHit, Span, StoredMessage, calls_json, fts_terms, snippet

if TYPE_CHECKING:
    from hermes_core.storage.url import StorageURL

__all__ = ["SpanStore", "Spans", "indexed_text", "match_words", "open_span_store",
           "span_store_at"]

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
_COLUMNS = "id, conversation, created_at, first_ts, last_ts, n_messages, digest"
_FORGOTTEN_DIGEST = "(digest removed: it mentioned a forgotten subject)"


def indexed_text(message: Message) -> str:
    """What the word index holds for a message: its text and its tool calls."""
    text = message.content
    if message.tool_calls:
        text += " " + " ".join(
            f"{c.name} {json.dumps(c.arguments, ensure_ascii=False, default=str)}"
            for c in message.tool_calls)
    return text


def match_words(db: Database, prefix: str, words: str, conversation: str, terms: list[str],
                limit: int, columns: str) -> tuple[list[Any], str]:
    """``columns`` (of ``m``, a message; ``{rank}``: its word score, higher is better) of the
    conversation's messages holding every word of ``terms``, else any of them, best first; and
    which matched ("all", "any" or "none")."""
    for every, how in ((True, "all"), (False, "any")):
        match = db.word_match(words, terms, every=every)
        rows = db.fetch(
            f"SELECT {columns.format(rank=match.rank)} FROM {prefix}span_messages m "
            f"JOIN {prefix}spans s ON s.id = m.span_id {match.join} "
            f"WHERE {match.where} AND s.conversation = ? ORDER BY {match.order} LIMIT ?",
            (*match.params, conversation, limit))
        if rows:
            return rows, how
        if len(terms) == 1:
            break
    return [], "none"


class Spans:
    """The spans of one backend; safe to share between threads. A backend sets :attr:`db`,
    :attr:`prefix` (of its table names), :attr:`words` (its word index, see
    :meth:`~hermes_core.storage.dialect.Database.word_match`) and writes the index."""

    db: Database
    prefix = ""
    words = "span_fts"
    path: Any

    def close(self) -> None:
        self.db.close()

    def _insert_messages(self, con: Any, span_id: int, messages: Sequence[Message]) -> None:
        """Insert one span's messages, in order, with their words indexed."""
        raise NotImplementedError

    def _unindex(self, con: Any, rows: list[tuple[int, str, str | None]]) -> None:
        """Take (id, content, tool calls) of messages about to be deleted out of the index."""

    def _claim_ids(self, con: Any, explicit: bool) -> None:
        """Before (``explicit`` False) and after (True) inserting spans with ids of their own."""

    def vector_storage(self) -> Any:
        """Where semantic search keeps this archive's vectors (:mod:`.vector_storage`)."""
        from .vector_storage import SpanVectorStorage

        return SpanVectorStorage(self)

    def count_vectors(self) -> int:
        """Message vectors stored (any model; 0 before semantic search first ran)."""
        return int(self.db.fetch(f"SELECT count(*) FROM {self.prefix}span_vectors")[0][0])

    # --------------------------------------------------------------------------- lineage

    def root_of(self, session_id: str) -> str | None:
        row = self.db.fetchone(
            f"SELECT root FROM {self.prefix}conversations WHERE session_id = ?", (session_id,))
        return str(row[0]) if row else None

    def link(self, session_id: str, root: str) -> None:
        """Record that ``session_id`` belongs to the conversation ``root``."""
        self.db.execute(
            f"INSERT INTO {self.prefix}conversations(session_id, root) VALUES (?, ?) "
            "ON CONFLICT (session_id) DO UPDATE SET root = excluded.root", (session_id, root),
            retry=True)  # the same row either way

    # ----------------------------------------------------------------------------- writes

    def add_span(self, conversation: str, messages: Sequence[Message], digest: str) -> Span:
        """Store ``messages`` as a new span, in one transaction (all or nothing)."""
        now = time.time()
        first = messages[0].timestamp if messages else None
        last = messages[-1].timestamp if messages else None
        with self.db.transaction() as con:
            span_id = self._new_span(con, (conversation, now, first, last, len(messages),
                                           self.db.text_in(digest)))
            self._insert_messages(con, span_id, messages)
        return Span(span_id, conversation, now, first, last, len(messages), digest)

    def _new_span(self, con: Any, values: tuple[object, ...]) -> int:
        """Insert a span (conversation, created_at, first_ts, last_ts, n_messages, digest) under
        a new id; the id."""
        (span_id,) = con.execute(self.db.sql(
            f"INSERT INTO {self.prefix}spans(conversation, created_at, first_ts, last_ts, "
            "n_messages, digest) VALUES (?, ?, ?, ?, ?, ?) RETURNING id"), values).fetchone()
        return int(span_id)

    def insert_spans(self, items: list[tuple[Span, list[Message]]]) -> list[int]:
        """Insert spans with their messages in one transaction (``storage migrate``), keeping
        each span's id when it is free; the spans' ids in the store, in order."""
        ids: list[int] = []
        db, p = self.db, self.prefix
        with db.transaction() as con:
            self._claim_ids(con, False)
            for span, messages in items:
                values = (span.conversation, span.created_at, span.first_ts, span.last_ts,
                          span.n_messages, db.text_in(span.digest))
                if db.rows(con, f"SELECT 1 FROM {p}spans WHERE id = ?", (span.id,)):
                    span_id = self._new_span(con, values)
                else:
                    span_id = span.id
                    con.execute(db.sql(
                        f"INSERT INTO {p}spans(id, conversation, created_at, first_ts, "
                        "last_ts, n_messages, digest) VALUES (?, ?, ?, ?, ?, ?, ?)"),
                        (span.id, *values))
                    self._claim_ids(con, True)
                self._insert_messages(con, int(span_id), messages)
                ids.append(int(span_id))
        return ids

    # ------------------------------------------------------------------------------ reads

    def spans(self, conversation: str, *, limit: int | None = None) -> list[Span]:
        """The conversation's spans, oldest first (the newest ``limit`` when given)."""
        sql = f"SELECT {_COLUMNS} FROM {self.prefix}spans WHERE conversation = ? ORDER BY id DESC"
        params: tuple[object, ...] = (conversation,)
        if limit is not None:
            sql += " LIMIT ?"
            params += (limit,)
        return [self._span(row) for row in reversed(self.db.fetch(sql, params))]

    def count_spans(self, conversation: str) -> int:
        return int(self.db.fetch(f"SELECT count(*) FROM {self.prefix}spans WHERE "
                                 "conversation = ?", (conversation,))[0][0])

    def span(self, span_id: int) -> Span | None:
        row = self.db.fetchone(f"SELECT {_COLUMNS} FROM {self.prefix}spans WHERE id = ?",
                               (span_id,))
        return self._span(row) if row else None

    def messages(self, span_id: int, start: int = 0, count: int = 50) -> list[StoredMessage]:
        rows = self.db.fetch(
            "SELECT seq, role, content, tool_calls, tool_call_id, tool_name, timestamp "
            f"FROM {self.prefix}span_messages WHERE span_id = ? AND seq >= ? ORDER BY seq "
            "LIMIT ?", (span_id, start, count))
        out = []
        for seq, role, content, calls, call_id, tool_name, ts in rows:
            tool_calls = _tool_calls(self.db.text_out(calls) if calls else None)
            message = Message(role=role, content=self.db.text_out(content), tool_calls=tool_calls,
                              tool_call_id=call_id, tool_name=tool_name,
                              timestamp=ts if ts is not None else 0.0)
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
        rows, _how = match_words(self.db, self.prefix, self.words, conversation, terms, limit,
                                 "m.span_id, m.seq, m.role, m.content, m.tool_calls, m.timestamp")
        out = self.db.text_out
        return [SearchHit(int(span), int(seq), role,
                          snippet(out(content) + " " + (out(calls) if calls else ""), terms), ts)
                for span, seq, role, content, calls, ts in rows]

    # ----------------------------------------------------------------------------- forget

    def forget(self, subject: str, *, dry_run: bool = False) -> tuple[list[tuple[int, int]], int]:
        """Delete archived messages mentioning ``subject`` (case and whitespace ignored).

        Returns ((span id, seq) of each match, digests cleared). In one transaction: each row
        leaves ``span_messages`` and the word index; a span digest that mentions the subject is
        replaced by a neutral note.
        """
        needle = squash(subject)
        db, p, out = self.db, self.prefix, self.db.text_out

        def mentions(text: str) -> bool:
            return bool(needle) and needle in squash(text)

        with db.transaction() as con:
            rows = db.rows(con, "SELECT id, span_id, seq, content, tool_calls FROM "
                           f"{p}span_messages{db.for_update}")
            hits = [(int(r[0]), int(r[1]), int(r[2]), out(r[3]), out(r[4]) if r[4] else None)
                    for r in rows]
            # tool calls also as written (their strings), not only as JSON (escaped)
            hits = [h for h in hits if mentions(h[3] + " " + (h[4] or "")) or (h[4] and any(
                mentions(t) for t in _strings(h[4])))]
            digests = [int(r[0]) for r in db.rows(con, f"SELECT id, digest FROM {p}spans"
                                                  f"{db.for_update}") if mentions(out(r[1]))]
            if not dry_run:
                if hits:
                    self._unindex(con, [(h[0], h[3], h[4]) for h in hits])
                    where, params = db.any_of("id", [h[0] for h in hits])
                    con.execute(db.sql(f"DELETE FROM {p}span_messages WHERE {where}"), params)
                if digests:
                    where, params = db.any_of("id", digests)
                    con.execute(db.sql(f"UPDATE {p}spans SET digest = ? WHERE {where}"),
                                (_FORGOTTEN_DIGEST, *params))
                if hits:
                    self._purge_index(con)
        if hits and not dry_run:
            self._purge_files()
        return [(h[1], h[2]) for h in hits], len(digests)

    def _purge_index(self, con: Any) -> None:
        """In the forget's transaction, after its deletes: no copy of the text stays in the
        word index (SQLite: its FTS5 segments are merged)."""

    def _purge_files(self) -> None:
        """After a forget's commit: the pages written before it leave the files (best effort)."""

    # --------------------------------------------------------------------------- transfer

    def conversation_links(self) -> list[tuple[str, str]]:
        return [(str(a), str(b)) for a, b in self.db.fetch(
            f"SELECT session_id, root FROM {self.prefix}conversations ORDER BY session_id")]

    def conversations(self) -> list[str]:
        return [str(r[0]) for r in self.db.fetch(
            f"SELECT DISTINCT conversation FROM {self.prefix}spans ORDER BY 1")]

    def _span(self, row: Any) -> Span:
        return Span(int(row[0]), row[1], row[2], row[3], row[4], int(row[5]),
                    self.db.text_out(row[6]))


class SpanStore(Spans):
    """Spans in one SQLite file, with a contentless FTS5 word index (one connection, one lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if path.is_dir():  # SQLite would say only "unable to open database file"
            from hermes_core.errors import ConfigError

            raise ConfigError(
                f"the lossless archive {path} is a folder, not a database file: set "
                "lossless.db_path to a file name (relative to the home; unset, context.db)")
        private_sqlite(path)  # 0600, and so its -wal/-shm
        self.db = SqliteDatabase(path, schema=_SCHEMA)

    def count_vectors(self) -> int:
        # the table is made by semantic search's first run
        if not self.db.fetch("SELECT 1 FROM sqlite_master WHERE name = 'span_vectors'"):
            return 0
        return super().count_vectors()

    def _insert_messages(self, con: Any, span_id: int, messages: Sequence[Message]) -> None:
        for seq, message in enumerate(messages):
            cur = con.execute(
                "INSERT INTO span_messages(span_id, seq, role, content, tool_calls, "
                "tool_call_id, tool_name, timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (span_id, seq, message.role, message.content,
                 calls_json(message) if message.tool_calls else None,
                 message.tool_call_id, message.tool_name, message.timestamp))
            con.execute("INSERT INTO span_fts(rowid, text) VALUES (?, ?)",
                        (cur.lastrowid, indexed_text(message)))

    def _purge_index(self, con: Any) -> None:
        # a deleted row's terms stay in the older segment (next to a delete marker) until the
        # segments are merged; 'optimize' merges them all into one, without them
        con.execute("INSERT INTO span_fts(span_fts) VALUES ('optimize')")

    def _purge_files(self) -> None:
        # not while another connection reads: its next checkpoint (or closing) truncates it
        if isinstance(self.db, SqliteDatabase):
            self.db.purge_wal()

    def _unindex(self, con: Any, rows: list[tuple[int, str, str | None]]) -> None:
        # a contentless index forgets a row only when given back exactly the text it indexed
        for rowid, content, calls in rows:
            con.execute("INSERT INTO span_fts(span_fts, rowid, text) VALUES ('delete', ?, ?)",
                        (rowid, indexed_text(Message("user", content,
                                                     tool_calls=_tool_calls(calls)))))
        # and their vectors, whichever process deletes them (the forget command's engine never
        # started semantic search); the database's go with their message (ON DELETE CASCADE).
        # SQLite gives the largest id again: a vector left behind would describe the next message
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'span_vectors'").fetchone():
            con.executemany("DELETE FROM span_vectors WHERE message_id = ?",
                            [(rowid,) for rowid, _c, _t in rows])


def _strings(calls: str) -> list[str]:
    """The strings of a stored tool-call JSON as they were written (a line break is whitespace
    to forget, a backslash or a quote is itself)."""
    try:
        return strings(json.loads(calls))
    except ValueError:
        return []


def _tool_calls(calls: str | None) -> list[ToolCall]:
    """The tool calls of a stored message (its ``tool_calls`` JSON)."""
    return [ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or {})
            for c in json.loads(calls or "[]")]


def open_span_store(context: Any, path: Path) -> Any:
    """:class:`~.pg_store.PgSpanStore` when ``storage.url`` (or ``$HERMES_CORE_STORAGE_URL``)
    is set, else the SQLite :class:`SpanStore` at ``path``; never a silent fallback."""
    storage = getattr(getattr(context, "config", None), "storage", None)
    return span_store_at(resolve_storage_url(getattr(storage, "url", None)), path)


def span_store_at(url: StorageURL | None, path: Path) -> Any:
    """The archive in the database at ``url``, or the SQLite file at ``path`` when it is None
    (named by the caller: ``$HERMES_CORE_STORAGE_URL`` is not consulted)."""
    if url is not None:
        from .pg_store import PgSpanStore

        return PgSpanStore(url)
    return SpanStore(path)
