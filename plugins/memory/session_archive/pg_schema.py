"""The session archive's PostgreSQL schema (component ``session_archive`` in ``hermes_schema``).

The tables mirror state.db's (sessions with a small ``num`` key, messages in insertion order), so
the archive's queries run on both. Search uses PostgreSQL's own text search:

* ``messages.tsv``: a tsvector set by a trigger, ``english`` configuration (Snowball stemming):
  content (weight A), tool-call argument values (B) and the tool name (C); NULL for copies a
  compaction carried into a child session, exactly as the SQLite archive leaves them unindexed.
  PostgreSQL caps one tsvector at 1 MB of distinct words: a message past that (a multi-megabyte
  blob) is indexed by its first ``TSV_CHARS`` characters; it is always stored whole.
* ``messages.cjk``: the message's CJK runs, one per line (NULL for the many messages with none),
  with a trigram index (``pg_trgm``) for substring search, since the text parser sees a run of
  CJK letters as one word. Without the extension the same search runs without the index.

Semantic search (migration 4): ``message_vectors`` holds one float16 embedding per message
(``bytea``, no extension needed), ``archive_meta`` the model they are made with (vectors.py);
each row names its model and text hash too (migration 7).

Derived memory (migration 6): ``facts`` and ``fact_sources`` (derive.py, facts.py).

Triggers keep each session's message count and last activity in sync, as state.db's do.
"""

from __future__ import annotations

import logging
from typing import Any

from hermes_core.storage.migrations import PgMigration

from .cjk import CJK_CLASS

__all__ = ["BUCKETS", "COMPONENT", "MIGRATIONS", "TSV_CHARS"]

log = logging.getLogger("hermes_core.plugins.session_archive")
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
_INDEXED = "(NEW.meta IS NULL OR (NEW.meta::jsonb -> 'carried_over') IS NULL)"
#: PostgreSQL's parser keeps paths, hosts, e-mail addresses, versions and hyphenated words as
#: single tokens ("/etc/hosts"); FTS5's unicode61 splits them into words. These characters are
#: read as spaces on both sides (documents here, queries in search.py), so "hosts" finds
#: "/etc/hosts" and "chat-send" finds the phrase "chat send", as in the SQLite archive.
SPLIT_CHARS = "/.@:-\\=?&#~+"
_SPACES = " " * len(SPLIT_CHARS)
_ARGS = ("(SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query("
         "jsonb_path_query_array(NEW.tool_calls::jsonb, '$[*].arguments'), "
         "'strict $.** ? (@.type() == \"string\" || @.type() == \"number\")') AS v)")


def _split(expr: str) -> str:
    return f"translate({expr}, '{SPLIT_CHARS}', '{_SPACES}')"


def _tsv(content: str) -> str:
    return f"""setweight(to_tsvector('english'::regconfig, {_split(content)}), 'A')
        || setweight(to_tsvector('english'::regconfig, {_split(f"coalesce({_ARGS}, '')")}), 'B')
        || setweight(to_tsvector('english'::regconfig,
                                 {_split("coalesce(NEW.tool_name, '')")}), 'C')"""


# The index columns, set before each insert or update: the whole message is indexed; only a
# message whose distinct words pass PostgreSQL's 1 MB tsvector limit (a multi-megabyte blob)
# falls back to its first TSV_CHARS characters instead of failing the insert.
_INDEX_FUNCTION = f"""CREATE FUNCTION hermes_messages_index() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT {_INDEXED} THEN
            NEW.tsv := NULL;
            NEW.cjk := NULL;
            RETURN NEW;
        END IF;
        IF length(NEW.content) <= {TSV_CHARS} THEN
            NEW.tsv := {_tsv("NEW.content")};
        ELSE
            BEGIN
                NEW.tsv := {_tsv("NEW.content")};
            EXCEPTION WHEN program_limit_exceeded THEN
                NEW.tsv := {_tsv(f"left(NEW.content, {TSV_CHARS})")};
            END;
        END IF;
        IF NEW.content ~ '[{_CJK}]' OR NEW.tool_calls ~ '[{_CJK}]' THEN
            NEW.cjk := btrim(regexp_replace(NEW.content || ' ' || coalesce(NEW.tool_calls, ''),
                                            '[^{_CJK}]+', E'\\n', 'g'), E'\\n');
        ELSE
            NEW.cjk := NULL;
        END IF;
        RETURN NEW;
    END $$"""

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
    "CREATE INDEX sessions_user ON sessions(user_id) WHERE user_id IS NOT NULL",
    "CREATE INDEX sessions_recent ON sessions(updated_at) WHERE superseded = 0",
    "CREATE INDEX sessions_title ON sessions(lower(title)) WHERE title IS NOT NULL",
    "CREATE INDEX sessions_conversation ON sessions(platform, "
    "((attributes::jsonb) ->> 'conversation_key'), num)",
    """CREATE TABLE messages (
        id BIGSERIAL PRIMARY KEY,
        session BIGINT NOT NULL REFERENCES sessions(num),
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_name TEXT,
        tool_call_id TEXT,
        tool_calls TEXT CHECK (tool_calls IS NULL OR tool_calls::jsonb IS NOT NULL),
        timestamp DOUBLE PRECISION NOT NULL,
        meta TEXT,
        tsv tsvector,
        cjk TEXT
    )""",
    _INDEX_FUNCTION,
    """CREATE TRIGGER messages_index BEFORE INSERT OR UPDATE ON messages
        FOR EACH ROW EXECUTE FUNCTION hermes_messages_index()""",
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
    except Exception:
        con.execute("CREATE INDEX messages_cjk_present ON messages(id) WHERE cjk IS NOT NULL")


#: sample buckets of the text index (migration 3): a message is in bucket
#: ``id * BUCKET_MIX % BUCKETS``. Searches no longer sample by bucket (reading k buckets from the
#: index cost ~0.5 microseconds per entry of those buckets, 50-100 ms at 1M messages); they read
#: stretches of ids instead (search.py). The index still answers every word query.
BUCKETS = 1024
BUCKET_MIX = 633


def _bucket_index(con: Any) -> None:
    """The text index keyed by (bucket, word) instead of word alone (btree_gin), so that a broad
    query reads only the matches of a few buckets - an even sample of all history - from the
    index. The word-only index is dropped: the two-column one answers word-only queries too.
    Without btree_gin the word index stays and a sample is filtered after the index (slower)."""
    try:
        with con.transaction():  # a savepoint: a refused extension leaves the migration intact
            con.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
            # a small pending list (256 kB instead of 4 MB): every search scans the pending list
            # whole, and appends merge it into the index more often, in smaller steps
            con.execute(f"CREATE INDEX messages_tsv_bucket ON messages USING gin "
                        f"(((id * {BUCKET_MIX}) % {BUCKETS}), tsv) "
                        "WITH (gin_pending_list_limit = 256)")
            con.execute("DROP INDEX messages_tsv")
    except Exception as exc:
        log.warning("session archive: no btree_gin (%s); broad searches sample without an "
                    "index and read more rows", str(exc).strip())
    # CJK runs of the few messages that have any, readable from the index alone: a 1-2 letter
    # run (no trigram) is matched there instead of in the table
    con.execute("CREATE INDEX messages_cjk_runs ON messages(id) INCLUDE (cjk) "
                "WHERE cjk IS NOT NULL")


#: one float16 embedding per embedded message (vectors.py), and the archive's key/value facts
#: (the model the vectors were made with, their dimension, the indexer's cursor). ``seq`` numbers
#: the vectors in the order they were committed (one node writes at a time, under an advisory
#: lock), so every node's in-memory index reads only what was added since it last looked, even
#: a vector of an older message embedded late.
_VECTORS: list[str] = [
    "CREATE TABLE archive_meta (key TEXT PRIMARY KEY, value TEXT)",
    """CREATE TABLE message_vectors (
        id BIGINT PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
        vec BYTEA NOT NULL,
        seq BIGSERIAL NOT NULL
    )""",
    "CREATE UNIQUE INDEX message_vectors_seq ON message_vectors(seq)",
]

# Each search ranks up to the candidate budget (2,000) of matches with ts_rank_cd, which reads
# every match's tsvector from the table. With the default storage (EXTENDED) a long message's
# tsvector is moved out of line first, and each such match costs a TOAST index lookup and TOAST
# pages on top of its table page. MAIN keeps the tsvector in the row (compressed if need be) and
# moves the content out first: the content is read only for the few hits shown. Applies to rows
# written from now on (a table rewrite, VACUUM FULL, moves the old ones).
# Inserts only mark pages all-visible when vacuumed; the default waits for 20% new rows, so the
# index-only reads of CJK runs fell back to the table for the newest fifth of the archive.
_V5: list[str] = [
    "ALTER TABLE messages ALTER COLUMN tsv SET STORAGE MAIN",
    "ALTER TABLE messages SET (autovacuum_vacuum_insert_scale_factor = 0.02)",
]


#: derived memory (derive.py, facts.py), as state.db's version 4: deleting a message deletes the
#: facts read from it; deleting a fact makes the one it superseded current again
_FACTS: list[str] = [
    """CREATE TABLE facts (
        id BIGSERIAL PRIMARY KEY,
        session BIGINT NOT NULL REFERENCES sessions(num) ON DELETE CASCADE,
        user_id TEXT,
        kind TEXT NOT NULL,
        topic TEXT NOT NULL,
        text TEXT NOT NULL,
        valid_from DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        superseded_by BIGINT,
        superseded_at DOUBLE PRECISION,
        model TEXT,
        vec BYTEA
    )""",
    "CREATE INDEX facts_user ON facts(user_id, id)",
    "CREATE INDEX facts_session ON facts(session)",
    """CREATE TABLE fact_sources (
        fact BIGINT NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
        message BIGINT NOT NULL,
        PRIMARY KEY (fact, message)
    )""",
    "CREATE INDEX fact_sources_message ON fact_sources(message)",
    """CREATE FUNCTION hermes_facts_message_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM facts WHERE id IN (SELECT fact FROM fact_sources WHERE message = OLD.id);
        RETURN OLD;
    END $$""",
    """CREATE TRIGGER facts_message_gone AFTER DELETE ON messages
        FOR EACH ROW EXECUTE FUNCTION hermes_facts_message_gone()""",
    """CREATE FUNCTION hermes_facts_gone() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE facts SET superseded_by = NULL, superseded_at = NULL
            WHERE superseded_by = OLD.id;
        RETURN OLD;
    END $$""",
    """CREATE TRIGGER facts_gone AFTER DELETE ON facts
        FOR EACH ROW EXECUTE FUNCTION hermes_facts_gone()""",
]


#: as state.db's version 5: each vector row names its model and the hash of its text (older rows:
#: NULL, the model in archive_meta); nullable columns, so no row is rewritten
_V7: list[str] = [
    "ALTER TABLE message_vectors ADD COLUMN model TEXT, ADD COLUMN text_hash TEXT",
]

MIGRATIONS: list[PgMigration] = [
    (1, "sessions, messages, text search (english tsvector), CJK runs, counters", _V1),
    (2, "trigram index over CJK runs (pg_trgm, when available)", _cjk_index),
    (3, "text index by (sample bucket, word) (btree_gin); CJK runs readable from an index",
     _bucket_index),
    (4, "message_vectors (float16 embeddings, in commit order) and archive_meta", _VECTORS),
    (5, "search vectors kept in the row (STORAGE MAIN); vacuum after 2% new rows", _V5),
    (6, "facts and fact_sources: memory derived from settled turns", _FACTS),
    (7, "message_vectors.model and text_hash: each vector names its model and text", _V7),
]
