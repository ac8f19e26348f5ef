"""The lossless archive's backend in the ``storage.url`` database: its schema and word index.

:class:`PgSpanStore` is :class:`~.store.Spans` over ``lossless_*`` tables, so every node serving
a conversation sees the spans any node archived. Messages are kept verbatim (NUL characters
included: stored escaped, given back unchanged); their words are a ``tsvector`` column (the
``simple`` configuration, matching the SQLite index's ``unicode61``), ranked by ``ts_rank_cd``.
Span ids come from a sequence shared by all nodes, so an id in one node's index message is the
same span on every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hermes_core.storage import StorageURL
from hermes_core.storage.dialect import PgDatabase
from hermes_core.storage.migrations import PgMigration
from hermes_core.storage.text import encode_text
from hermes_core.types import Message

from .records import calls_json
from .store import Spans, indexed_text

__all__ = ["COMPONENT", "MIGRATIONS", "PgSpanStore", "SpanStoreError", "insert_span_messages"]

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


class SpanStoreError(RuntimeError):
    """The database refused or could not be reached; the message names it (password hidden)."""


class PgSpanStore(Spans):
    """Spans in PostgreSQL; safe to share between threads (a connection pool)."""

    prefix = "lossless_"
    words = "m.words"

    def __init__(self, url: StorageURL) -> None:
        self.url = url
        self.path = url.redacted  # where, for messages
        self.db = PgDatabase(url, COMPONENT, MIGRATIONS, error=SpanStoreError,
                             what="the lossless archive")

    def _insert_messages(self, con: Any, span_id: int, messages: Sequence[Message]) -> None:
        insert_span_messages(con, span_id, messages)

    def _claim_ids(self, con: Any, explicit: bool) -> None:
        if explicit:  # the sequence goes on past an id given explicitly
            con.execute("SELECT setval(pg_get_serial_sequence('lossless_spans', 'id'), "
                        "greatest((SELECT max(id) FROM lossless_spans), 1))")
        else:  # no other node takes an id while the ids are checked and given
            con.execute("LOCK TABLE lossless_spans IN SHARE ROW EXCLUSIVE MODE")


def insert_span_messages(con: Any, span_id: int, messages: Sequence[Message]) -> None:
    """Insert one span's messages, in order, with their words (one statement batch)."""
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
