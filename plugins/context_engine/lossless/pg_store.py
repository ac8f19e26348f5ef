"""The lossless engine's archive in the ``storage.url`` database: the same surface as store.py.

:class:`PgSpanStore` keeps spans, their messages and the session -> conversation links in
``lossless_*`` tables, so every node serving a conversation sees the spans any node archived.
It answers exactly what :class:`~.store.SpanStore` answers:

* a span is written in one transaction (all or nothing), its messages verbatim (NUL characters
  included: stored escaped, given back unchanged);
* search matches words as the SQLite index does (``unicode61``: lower-cased words, no stemming:
  PostgreSQL's ``simple`` text search configuration), every word first, any word when nothing
  has them all, best first (``ts_rank_cd``), only in the conversation's spans;
* ``forget`` deletes the matching messages and clears digests in one transaction.

Span ids come from a sequence shared by all nodes, so an id in one node's index message is the
same span on every node.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from hermes_core.storage import StorageURL
from hermes_core.storage.component import open_component, run_on
from hermes_core.storage.migrations import PgMigration
from hermes_core.storage.pool import connect_error, import_psycopg
from hermes_core.storage.text import decode_text, encode_text
from hermes_core.types import Message, ToolCall

from .records import SearchHit, Span, StoredMessage, calls_json, fts_terms, snippet

__all__ = ["COMPONENT", "MIGRATIONS", "PgSpanStore", "SpanStoreError"]

COMPONENT = "lossless"
MIGRATIONS: list[PgMigration] = [
    (1, "lossless: spans, their messages (with a word index), conversation links", [
        """CREATE TABLE lossless_spans (
            id BIGSERIAL PRIMARY KEY,
            conversation TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            first_ts DOUBLE PRECISION,
            last_ts DOUBLE PRECISION,
            n_messages INTEGER NOT NULL,
            digest TEXT NOT NULL
        )""",
        "CREATE INDEX lossless_spans_by_conversation ON lossless_spans(conversation, id)",
        """CREATE TABLE lossless_span_messages (
            id BIGSERIAL PRIMARY KEY,
            span_id BIGINT NOT NULL REFERENCES lossless_spans(id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            tool_calls TEXT,
            tool_call_id TEXT,
            tool_name TEXT,
            timestamp DOUBLE PRECISION,
            words TSVECTOR NOT NULL,
            UNIQUE (span_id, seq)
        )""",
        "CREATE INDEX lossless_span_messages_words ON lossless_span_messages USING GIN (words)",
        """CREATE TABLE lossless_conversations (
            session_id TEXT PRIMARY KEY,
            root TEXT NOT NULL
        )""",
    ]),
    (2, "lossless: one vector per archived message (semantic context_search)", [
        """CREATE TABLE lossless_span_vectors (
            message_id BIGINT PRIMARY KEY
                REFERENCES lossless_span_messages(id) ON DELETE CASCADE,
            model TEXT NOT NULL,
            text_hash TEXT NOT NULL,
            vec BYTEA NOT NULL
        )""",
    ]),
]
#: a tsvector holds at most 1 MB; longer texts are indexed by their start (stored whole)
_INDEX_CHARS = 100_000
_COLUMNS = "id, conversation, created_at, first_ts, last_ts, n_messages, digest"


class SpanStoreError(RuntimeError):
    """The database refused or could not be reached; the message names it (password hidden)."""


def indexed_text(message: Message) -> str:
    """What the word index holds for a message: its text and its tool calls (as store.py)."""
    text = message.content
    if message.tool_calls:
        text += " " + " ".join(
            f"{c.name} {json.dumps(c.arguments, ensure_ascii=False, default=str)}"
            for c in message.tool_calls)
    return text


class PgSpanStore:
    """Spans in PostgreSQL; safe to share between threads (a connection pool)."""

    def __init__(self, url: StorageURL) -> None:
        self.url = url
        self.path = url.redacted  # where, for messages
        self._psycopg = import_psycopg()
        self._pool: Any = open_component(url, COMPONENT, MIGRATIONS)

    def close(self) -> None:
        """Nothing to close: the pool is the process's (closed at exit)."""

    def _run(self, fn: Callable[[Any], Any], *, retry: bool = False) -> Any:
        """``fn(connection)``; ``retry``: safe to run again after a dropped connection."""
        psycopg = self._psycopg
        try:
            return run_on(self._pool, fn, retry=retry)
        except psycopg.OperationalError as exc:
            raise SpanStoreError(str(connect_error(self.url, exc))) from None
        except psycopg.Error as exc:
            raise SpanStoreError(f"the lossless archive in {self.url.redacted} refused the "
                                 f"request: {exc}; nothing was changed") from None

    def _fetch(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        return self._run(lambda con: con.execute(sql, params).fetchall(),  # type: ignore[no-any-return]
                         retry=True)

    # --------------------------------------------------------------------------- lineage

    def root_of(self, session_id: str) -> str | None:
        row = self._run(lambda con: con.execute(
            "SELECT root FROM lossless_conversations WHERE session_id = %s",
            (session_id,)).fetchone(), retry=True)
        return str(row[0]) if row else None

    def link(self, session_id: str, root: str) -> None:
        self._run(lambda con: con.execute(
            "INSERT INTO lossless_conversations(session_id, root) VALUES (%s, %s) "
            "ON CONFLICT (session_id) DO UPDATE SET root = excluded.root", (session_id, root)),
            retry=True)  # the same row either way

    # ----------------------------------------------------------------------------- writes

    def add_span(self, conversation: str, messages: Sequence[Message], digest: str) -> Span:
        """Store ``messages`` as a new span, in one transaction (all or nothing)."""
        now = time.time()
        first = messages[0].timestamp if messages else None
        last = messages[-1].timestamp if messages else None

        def run(con: Any) -> int:
            with con.transaction():
                (span_id,) = con.execute(
                    "INSERT INTO lossless_spans(conversation, created_at, first_ts, last_ts, "
                    "n_messages, digest) VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                    (conversation, now, first, last, len(messages), encode_text(digest)),
                ).fetchone()
                insert_span_messages(con, int(span_id), messages)
                return int(span_id)

        span_id = self._run(run)
        return Span(span_id, conversation, now, first, last, len(messages), digest)

    # ------------------------------------------------------------------------------ reads

    def spans(self, conversation: str, *, limit: int | None = None) -> list[Span]:
        sql = (f"SELECT {_COLUMNS} FROM lossless_spans WHERE conversation = %s "
               "ORDER BY id DESC")
        params: tuple[object, ...] = (conversation,)
        if limit is not None:
            sql += " LIMIT %s"
            params += (limit,)
        rows = self._fetch(sql, params)
        return [_span(row) for row in reversed(rows)]

    def count_spans(self, conversation: str) -> int:
        row = self._run(lambda con: con.execute(
            "SELECT count(*) FROM lossless_spans WHERE conversation = %s",
            (conversation,)).fetchone(), retry=True)
        return int(row[0])

    def span(self, span_id: int) -> Span | None:
        row = self._run(lambda con: con.execute(
            f"SELECT {_COLUMNS} FROM lossless_spans WHERE id = %s", (span_id,)).fetchone(),
            retry=True)
        return _span(row) if row else None

    def messages(self, span_id: int, start: int = 0, count: int = 50) -> list[StoredMessage]:
        rows = self._fetch(
            "SELECT seq, role, content, tool_calls, tool_call_id, tool_name, timestamp "
            "FROM lossless_span_messages WHERE span_id = %s AND seq >= %s ORDER BY seq "
            "LIMIT %s", (span_id, start, count))
        return [StoredMessage(span_id, int(row[0]), _message(row)) for row in rows]

    def search(self, conversation: str, query: str, *, limit: int = 8) -> list[SearchHit]:
        """Messages of the conversation's spans matching ``query``, best first (every word,
        else any word); never raises for punctuation in ``query``."""
        terms = fts_terms(query)
        if not terms:
            return []
        rows: list[Any] = []
        for joiner in (" && ", " || "):
            tsquery = joiner.join(["plainto_tsquery('simple', %s)"] * len(terms))
            sql = ("SELECT m.span_id, m.seq, m.role, m.content, m.tool_calls, m.timestamp "
                   f"FROM lossless_span_messages m JOIN lossless_spans s ON s.id = m.span_id, "
                   f"(SELECT {tsquery} AS query) AS q WHERE m.words @@ q.query AND s.conversation = %s "
                   "ORDER BY ts_rank_cd(m.words, q.query) DESC, m.id LIMIT %s")
            rows = self._fetch(sql, (*terms, conversation, limit))
            if rows or len(terms) == 1:
                break
        out = []
        for span, seq, role, content, calls, ts in rows:
            text = decode_text(content) + " " + (decode_text(calls) if calls else "")
            out.append(SearchHit(int(span), int(seq), role, snippet(text, terms), ts))
        return out

    # ----------------------------------------------------------------------------- forget

    def forget(self, subject: str, *, dry_run: bool = False) -> tuple[list[tuple[int, int]], int]:
        """Delete archived messages mentioning ``subject`` (case and whitespace ignored);
        ((span id, seq) of each, digests cleared), in one transaction."""
        needle = " ".join(subject.split()).casefold()

        def mentions(text: str) -> bool:
            return bool(needle) and needle in " ".join(text.split()).casefold()

        def run(con: Any) -> tuple[list[tuple[int, int]], int]:
            with con.transaction():
                rows = con.execute("SELECT id, span_id, seq, content, tool_calls FROM "
                                   "lossless_span_messages FOR UPDATE").fetchall()
                hits = [r for r in rows if mentions(
                    decode_text(r[3]) + " " + (decode_text(r[4]) if r[4] else ""))]
                digests = [r[0] for r in con.execute(
                    "SELECT id, digest FROM lossless_spans FOR UPDATE").fetchall()
                    if mentions(decode_text(r[1]))]
                if not dry_run:
                    if hits:
                        con.execute("DELETE FROM lossless_span_messages WHERE id = ANY(%s)",
                                    ([r[0] for r in hits],))
                    if digests:
                        con.execute("UPDATE lossless_spans SET digest = %s WHERE id = ANY(%s)",
                                    ("(digest removed: it mentioned a forgotten subject)",
                                     digests))
                return [(int(r[1]), int(r[2])) for r in hits], len(digests)

        return self._run(run)  # type: ignore[no-any-return]

    # --------------------------------------------------------------------------- transfer

    def conversation_links(self) -> list[tuple[str, str]]:
        return [(str(a), str(b)) for a, b in self._fetch(
            "SELECT session_id, root FROM lossless_conversations ORDER BY session_id", ())]

    def vector_storage(self) -> Any:
        """Where semantic search keeps this archive's vectors (:mod:`.pg_vectors`)."""
        from .pg_vectors import PgVectorStorage

        return PgVectorStorage(run=self._run, fetch=self._fetch, path=self.path)

    def count_vectors(self) -> int:
        """Message vectors stored (any model)."""
        return int(self._fetch("SELECT count(*) FROM lossless_span_vectors", ())[0][0])

    def conversations(self) -> list[str]:
        return [str(r[0]) for r in self._fetch(
            "SELECT DISTINCT conversation FROM lossless_spans ORDER BY 1", ())]



def insert_span_messages(con: Any, span_id: int, messages: Sequence[Message]) -> None:
    """Insert one span's messages, in order, with their search text (one statement batch)."""
    with con.cursor() as cur:
        cur.executemany(
            "INSERT INTO lossless_span_messages(span_id, seq, role, content, "
            "tool_calls, tool_call_id, tool_name, timestamp, words) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))",
            [(span_id, seq, m.role, encode_text(m.content),
              encode_text(calls_json(m)) if m.tool_calls else None,
              m.tool_call_id, m.tool_name, m.timestamp,
              indexed_text(m).replace("\x00", " ")[:_INDEX_CHARS])
             for seq, m in enumerate(messages)])

def _span(row: Any) -> Span:
    return Span(int(row[0]), row[1], row[2], row[3], row[4], int(row[5]), decode_text(row[6]))


def _message(row: Any) -> Message:
    _seq, role, content, calls, call_id, tool_name, ts = row
    tool_calls = [ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or {})
                  for c in json.loads(decode_text(calls) if calls else "[]")]
    return Message(role=role, content=decode_text(content), tool_calls=tool_calls,
                   tool_call_id=call_id, tool_name=tool_name,
                   timestamp=ts if ts is not None else 0.0)
