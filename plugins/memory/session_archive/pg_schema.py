"""The session archive's PostgreSQL schema (component ``session_archive`` in ``hermes_schema``).

The tables mirror state.db's (sessions with a small ``num`` key, messages in insertion order), so
the archive's queries run on both. Search uses PostgreSQL's own text search:

* ``messages.tsv``: a stored generated tsvector, ``english`` configuration (Snowball stemming):
  content (weight A), tool-call argument values (B) and the tool name (C); NULL for copies a
  compaction carried into a child session, exactly as the SQLite archive leaves them unindexed.
  Only the first ``TSV_CHARS`` characters of a message are indexed (PostgreSQL caps one tsvector
  at 1 MB); a longer message is stored whole.
* ``messages.cjk``: the message's CJK runs, one per line (NULL for the many messages with none),
  with a trigram index (``pg_trgm``) for substring search, since the text parser sees a run of
  CJK letters as one word. Without the extension the same search runs without the index.

Triggers keep each session's message count and last activity in sync, as state.db's do.
"""

from __future__ import annotations

from typing import Any

from hermes_core.storage.migrations import PgMigration

from .cjk import CJK_CLASS

__all__ = ["COMPONENT", "MIGRATIONS", "TSV_CHARS"]

COMPONENT = "session_archive"
TSV_CHARS = 100_000


def _pg_class() -> str:
    """cjk.CJK_CLASS in PostgreSQL regular-expression escapes (\\uXXXX, \\UXXXXXXXX)."""
    out = []
    for ch in CJK_CLASS:
        code = ord(ch)
        out.append(ch if ch == "-" else (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"))
    return "".join(out)


_CJK = _pg_class()
_INDEXED = "(meta IS NULL OR (meta::jsonb -> 'carried_over') IS NULL)"
_ARGS = ("coalesce(jsonb_path_query_array(tool_calls::jsonb, '$[*].arguments'), '[]'::jsonb)")
_TSV = f"""CASE WHEN {_INDEXED} THEN
    setweight(to_tsvector('english'::regconfig, left(content, {TSV_CHARS})), 'A')
    || setweight(jsonb_to_tsvector('english'::regconfig, {_ARGS}, '["string", "numeric"]'), 'B')
    || setweight(to_tsvector('english'::regconfig, coalesce(tool_name, '')), 'C')
  END"""
_CJK_TEXT = f"""CASE WHEN {_INDEXED} AND (content ~ '[{_CJK}]' OR tool_calls ~ '[{_CJK}]') THEN
    btrim(regexp_replace(content || ' ' || coalesce(tool_calls, ''), '[^{_CJK}]+', E'\\n', 'g'),
          E'\\n')
  END"""

_V1: list[str] = [
    """CREATE TABLE sessions (
        num BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        platform TEXT NOT NULL DEFAULT 'cli',
        model TEXT,
        title TEXT,
        started_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        ended_at DOUBLE PRECISION,
        end_reason TEXT,
        parent_session_id TEXT,
        origin TEXT,
        chain BIGINT NOT NULL,
        superseded INTEGER NOT NULL DEFAULT 0,
        message_count INTEGER NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        cache_read_tokens BIGINT NOT NULL DEFAULT 0,
        cache_write_tokens BIGINT NOT NULL DEFAULT 0,
        api_calls BIGINT NOT NULL DEFAULT 0,
        cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0,
        attributes TEXT,
        user_id TEXT
    )""",
    "CREATE INDEX sessions_parent ON sessions(parent_session_id) "
    "WHERE parent_session_id IS NOT NULL",
    "CREATE INDEX sessions_chain ON sessions(chain)",
    "CREATE INDEX sessions_recent ON sessions(updated_at) WHERE superseded = 0",
    "CREATE INDEX sessions_title ON sessions(lower(title)) WHERE title IS NOT NULL",
    "CREATE INDEX sessions_conversation ON sessions(platform, "
    "((attributes::jsonb) ->> 'conversation_key'), num)",
    f"""CREATE TABLE messages (
        id BIGSERIAL PRIMARY KEY,
        session BIGINT NOT NULL REFERENCES sessions(num),
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_name TEXT,
        tool_call_id TEXT,
        tool_calls TEXT CHECK (tool_calls IS NULL OR tool_calls::jsonb IS NOT NULL),
        timestamp DOUBLE PRECISION NOT NULL,
        meta TEXT,
        tsv tsvector GENERATED ALWAYS AS ({_TSV}) STORED,
        cjk TEXT GENERATED ALWAYS AS ({_CJK_TEXT}) STORED
    )""",
    "CREATE INDEX messages_session ON messages(session, id)",
    "CREATE INDEX messages_tsv ON messages USING gin(tsv)",
    """CREATE FUNCTION hermes_messages_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            UPDATE sessions SET message_count = message_count + 1,
                updated_at = greatest(updated_at, NEW.timestamp) WHERE num = NEW.session;
            RETURN NEW;
        END IF;
        UPDATE sessions SET message_count = message_count - 1 WHERE num = OLD.session;
        RETURN OLD;
    END $$""",
    """CREATE TRIGGER messages_count AFTER INSERT OR DELETE ON messages
        FOR EACH ROW EXECUTE FUNCTION hermes_messages_count()""",
]


def _cjk_index(con: Any) -> None:
    """The trigram index for CJK substrings, when pg_trgm can be had (else searched unindexed)."""
    try:
        with con.transaction():  # a savepoint: a refused extension leaves the migration intact
            con.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            con.execute("CREATE INDEX messages_cjk ON messages USING gin(cjk gin_trgm_ops) "
                        "WHERE cjk IS NOT NULL")
    except Exception:  # noqa: BLE001 - no extension: LIKE still finds every match, unindexed
        con.execute("CREATE INDEX messages_cjk_present ON messages(id) WHERE cjk IS NOT NULL")


MIGRATIONS: list[PgMigration] = [
    (1, "sessions, messages, text search (english tsvector), CJK runs, counters", _V1),
    (2, "trigram index over CJK runs (pg_trgm, when available)", _cjk_index),
]
