"""The state.db schema, its version, and the forward migrations that bring an older file up to it.

Layout (version 3; version 2 added ``sessions.user_id``, the user key of memory.scope: user;
version 3 ``message_vectors``, the embeddings of semantic search):

* ``sessions``: one row per session. ``num`` is a small integer key the messages refer to (it
  keeps every message row and index entry ~30 bytes smaller than a text id would); ``id`` is the
  kernel's session id. ``chain`` is the ``num`` of the first session of its compaction chain and
  ``superseded`` marks a session a compaction continued in a child, so listings can show each chain
  once, as its newest session, with one indexed query.
* ``messages``: one row per message, in insertion order (``id``). Tool calls are a JSON array.
* ``messages_fts``: FTS5 over content, tool name and tool-call argument values, with *external
  content*: it reads the text from the ``messages_search`` view instead of keeping a copy, so the
  text is stored once. Tool-call ids are left out of the index (random strings no one searches for,
  and at a million messages they would be most of the vocabulary).
* ``messages_cjk`` (trigram) and ``messages_cjk_grams`` (unigrams and bigrams, rowids only):
  contentless FTS5 tables over the CJK runs of the few messages that have any; see cjk.py.
* ``meta``: key/value pairs; ``schema_version`` mirrors ``PRAGMA user_version`` for humans.
* ``message_vectors`` (version 3): one float16 embedding per user/assistant message, written by
  the background indexer (vectors.py); ``meta`` records the model they are made with, and each
  row (version 5) its ``model`` and ``text_hash`` (hermes_core.storage.vectors' row shape).
* ``term_impacts`` and ``term_bounds`` (version 6): the best messages of the commonest words in
  BM25 order, so that a one-word search need not score every match (impacts.py).
* ``facts`` and ``fact_sources`` (version 4): derived memory (derive.py, facts.py), each fact
  linked to the messages it was read from; triggers delete a fact with any of its messages.

Triggers keep every index in sync with ``messages``; copies of messages a compaction carried into a
child session (``meta.carried_over``) are stored but not indexed, so a search finds each once.
The CJK triggers call two SQL functions the archive registers on its connections
(``hc_cjk_runs``, ``hc_cjk_grams``): a connection without them cannot write messages at all,
which is better than writing them unindexed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence

from .cjk import cjk_grams, cjk_runs

__all__ = [
    "APPLICATION_ID",
    "INDEXED_SQL",
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "migrate",
    "register_functions",
]

#: ``PRAGMA application_id`` of a hermes-core state.db ("HCSA"), so a foreign SQLite file is
#: recognised and refused instead of being filled with our tables.
APPLICATION_ID = 0x48435341

# The text FTS5 indexes for tool calls: every string or number value except the calls' own ids
# (a call's id sits at path "$[N]", argument values deeper).
_TOOL_ARGS = """(SELECT group_concat(j.atom, ' ') FROM json_tree({col}) AS j
    WHERE j.type IN ('text', 'integer', 'real') AND NOT (j.key = 'id' AND j.path NOT LIKE '%.%'))"""


def _args(row: str) -> str:
    return _TOOL_ARGS.format(col=f"{row}.tool_calls")


def _indexed(row: str) -> str:
    """Whether a message is searchable: not a copy a compaction carried into a child session.

    After a compaction the agent re-emits the kept messages into the child session, marked
    ``meta.carried_over``; they are stored (the child's history stays complete) but not indexed,
    because the original in the parent already is: a search finds each message once.
    """
    return f"({row}.meta IS NULL OR json_extract({row}.meta, '$.carried_over') IS NULL)"


_V1: list[str] = [
    """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID""",
    """CREATE TABLE sessions (
        num INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        platform TEXT NOT NULL DEFAULT 'cli',
        model TEXT,
        title TEXT,
        started_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        ended_at REAL,
        end_reason TEXT,
        parent_session_id TEXT,
        origin TEXT,
        chain INTEGER NOT NULL,
        superseded INTEGER NOT NULL DEFAULT 0,
        message_count INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        api_calls INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        attributes TEXT
    )""",
    "CREATE INDEX sessions_parent ON sessions(parent_session_id) "
    "WHERE parent_session_id IS NOT NULL",
    "CREATE INDEX sessions_chain ON sessions(chain)",
    "CREATE INDEX sessions_recent ON sessions(updated_at) WHERE superseded = 0",
    "CREATE INDEX sessions_title ON sessions(title COLLATE NOCASE) WHERE title IS NOT NULL",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session INTEGER NOT NULL REFERENCES sessions(num),
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_name TEXT,
        tool_call_id TEXT,
        tool_calls TEXT CHECK (tool_calls IS NULL OR json_valid(tool_calls)),
        timestamp REAL NOT NULL,
        meta TEXT
    )""",
    # (session) alone: index entries end with the rowid, so a session's messages come out in
    # insertion order without storing the id twice.
    "CREATE INDEX messages_session ON messages(session)",
    f"""CREATE VIEW messages_search (id, content, tool_name, tool_args) AS
        SELECT m.id, m.content, m.tool_name, {_args('m')} FROM messages AS m
        WHERE {_indexed('m')}""",
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, tool_name, tool_args,
        content='messages_search', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 2')""",
    """CREATE VIRTUAL TABLE messages_cjk USING fts5(runs, content='', tokenize='trigram')""",
    """CREATE VIRTUAL TABLE messages_cjk_grams USING fts5(
        grams, content='', detail='none', columnsize=0,
        tokenize='unicode61 remove_diacritics 0')""",
    f"""CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content, tool_name, tool_args)
            SELECT new.id, new.content, new.tool_name, {_args('new')} WHERE {_indexed('new')};
        UPDATE sessions SET message_count = message_count + 1,
            updated_at = max(updated_at, new.timestamp) WHERE num = new.session;
    END""",
    f"""CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_args)
            SELECT 'delete', old.id, old.content, old.tool_name, {_args('old')}
            WHERE {_indexed('old')};
        UPDATE sessions SET message_count = message_count - 1 WHERE num = old.session;
    END""",
    f"""CREATE TRIGGER messages_au AFTER UPDATE OF content, tool_name, tool_calls, meta
        ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_args)
            SELECT 'delete', old.id, old.content, old.tool_name, {_args('old')}
            WHERE {_indexed('old')};
        INSERT INTO messages_fts(rowid, content, tool_name, tool_args)
            SELECT new.id, new.content, new.tool_name, {_args('new')} WHERE {_indexed('new')};
    END""",
    f"""CREATE TRIGGER messages_cjk_ai AFTER INSERT ON messages
        WHEN {_indexed('new')} AND hc_cjk_runs(new.content, new.tool_calls) IS NOT NULL BEGIN
        INSERT INTO messages_cjk(rowid, runs)
            VALUES (new.id, hc_cjk_runs(new.content, new.tool_calls));
        INSERT INTO messages_cjk_grams(rowid, grams)
            VALUES (new.id, hc_cjk_grams(new.content, new.tool_calls));
    END""",
    f"""CREATE TRIGGER messages_cjk_ad AFTER DELETE ON messages
        WHEN {_indexed('old')} AND hc_cjk_runs(old.content, old.tool_calls) IS NOT NULL BEGIN
        INSERT INTO messages_cjk(messages_cjk, rowid, runs)
            VALUES ('delete', old.id, hc_cjk_runs(old.content, old.tool_calls));
        INSERT INTO messages_cjk_grams(messages_cjk_grams, rowid, grams)
            VALUES ('delete', old.id, hc_cjk_grams(old.content, old.tool_calls));
    END""",
    f"""CREATE TRIGGER messages_cjk_au AFTER UPDATE OF content, tool_calls, meta ON messages BEGIN
        INSERT INTO messages_cjk(messages_cjk, rowid, runs)
            SELECT 'delete', old.id, hc_cjk_runs(old.content, old.tool_calls)
            WHERE {_indexed('old')} AND hc_cjk_runs(old.content, old.tool_calls) IS NOT NULL;
        INSERT INTO messages_cjk_grams(messages_cjk_grams, rowid, grams)
            SELECT 'delete', old.id, hc_cjk_grams(old.content, old.tool_calls)
            WHERE {_indexed('old')} AND hc_cjk_grams(old.content, old.tool_calls) IS NOT NULL;
        INSERT INTO messages_cjk(rowid, runs)
            SELECT new.id, hc_cjk_runs(new.content, new.tool_calls)
            WHERE {_indexed('new')} AND hc_cjk_runs(new.content, new.tool_calls) IS NOT NULL;
        INSERT INTO messages_cjk_grams(rowid, grams)
            SELECT new.id, hc_cjk_grams(new.content, new.tool_calls)
            WHERE {_indexed('new')} AND hc_cjk_grams(new.content, new.tool_calls) IS NOT NULL;
    END""",
]

#: the SQL condition (on alias ``m``) of a message that is searchable and shown in windows
INDEXED_SQL = _indexed("m")

Migration = tuple[int, str, Callable[[sqlite3.Connection], None] | Sequence[str]]

#: (version, what it does, statements or a function of the connection), in order. A migration
#: runs inside one write transaction together with the version bump, so a crash leaves the file at
#: the old version or the new one, never in between. Never edit a released entry: add a new one.
_V2: list[str] = [
    "ALTER TABLE sessions ADD COLUMN user_id TEXT",
    "UPDATE sessions SET user_id = json_extract(attributes, '$.user_id') "
    "WHERE json_valid(attributes) AND json_type(attributes, '$.user_id') = 'text'",
    "CREATE INDEX sessions_user ON sessions(user_id) WHERE user_id IS NOT NULL",
]
_V3 = [
    # one float16 vector per embedded message (see vectors.py); the model is in meta
    """CREATE TABLE message_vectors (id INTEGER PRIMARY KEY, vec BLOB NOT NULL)""",
    """CREATE TRIGGER message_vectors_ad AFTER DELETE ON messages BEGIN
        DELETE FROM message_vectors WHERE id = old.id;
    END""",
]

_V4 = [
    # derived memory (facts.py): atomic facts the auxiliary model read from settled turns, each
    # linked to the messages it came from; deleting a message deletes what was derived from it,
    # and deleting a fact makes the one it superseded current again
    """CREATE TABLE facts (
        id INTEGER PRIMARY KEY,
        session INTEGER NOT NULL,
        user_id TEXT,
        kind TEXT NOT NULL,
        topic TEXT NOT NULL,
        text TEXT NOT NULL,
        valid_from REAL NOT NULL,
        created_at REAL NOT NULL,
        superseded_by INTEGER,
        superseded_at REAL,
        model TEXT,
        vec BLOB
    )""",
    "CREATE INDEX facts_user ON facts(user_id, id)",
    "CREATE INDEX facts_session ON facts(session)",
    """CREATE TABLE fact_sources (fact INTEGER NOT NULL, message INTEGER NOT NULL,
        PRIMARY KEY (fact, message)) WITHOUT ROWID""",
    "CREATE INDEX fact_sources_message ON fact_sources(message)",
    """CREATE TRIGGER facts_message_ad AFTER DELETE ON messages BEGIN
        DELETE FROM facts WHERE id IN (SELECT fact FROM fact_sources WHERE message = old.id);
    END""",
    """CREATE TRIGGER facts_ad AFTER DELETE ON facts BEGIN
        DELETE FROM fact_sources WHERE fact = old.id;
        UPDATE facts SET superseded_by = NULL, superseded_at = NULL WHERE superseded_by = old.id;
    END""",
]

_V5 = [
    # every store's vector rows name their model and the hash of the text embedded
    # (hermes_core.storage.vectors); rows written before carry neither (NULL): they are the
    # model recorded in meta, as before. Adding nullable columns rewrites no row.
    "ALTER TABLE message_vectors ADD COLUMN model TEXT",
    "ALTER TABLE message_vectors ADD COLUMN text_hash TEXT",
]

_UPTO = "(SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'impacts_upto')"
# messages deleted or changed in place, counted: a build of the kept rows checks that none was
# while it read them
_CHANGED = ("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
            "WHERE key = 'message_changes';")
_V6 = [
    # impacts.py: the best messages of the commonest words, in BM25 order, built by
    # impacts.rebuild (storage migrate); empty, and unused, until then
    """CREATE TABLE IF NOT EXISTS term_bounds (term TEXT PRIMARY KEY,
        num INTEGER NOT NULL UNIQUE, bound REAL NOT NULL, avgdl REAL NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS term_impacts (term INTEGER NOT NULL, key REAL NOT NULL,
        doc INTEGER NOT NULL, tf INTEGER NOT NULL, dl INTEGER NOT NULL,
        PRIMARY KEY (term, key DESC, doc)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS term_impacts_doc ON term_impacts(doc)",
    # a deleted message leaves no row; a message stored or changed at or below the covered
    # id is ranked by FTS5 itself until the next rebuild; deletions and changes are counted
    "INSERT OR IGNORE INTO meta(key, value) VALUES ('message_changes', '0')",
    f"""CREATE TRIGGER IF NOT EXISTS term_impacts_ad AFTER DELETE ON messages BEGIN
        DELETE FROM term_impacts WHERE doc = old.id;
        {_CHANGED}
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS term_impacts_ai AFTER INSERT ON messages
        WHEN new.id <= {_UPTO} BEGIN
        UPDATE meta SET value = CAST(new.id - 1 AS TEXT) WHERE key = 'impacts_upto';
    END""",
    f"""CREATE TRIGGER IF NOT EXISTS term_impacts_au
        AFTER UPDATE OF content, tool_name, tool_calls, meta ON messages BEGIN
        UPDATE meta SET value = CAST(old.id - 1 AS TEXT)
            WHERE key = 'impacts_upto' AND CAST(value AS INTEGER) >= old.id;
        {_CHANGED}
    END""",
]

MIGRATIONS: list[Migration] = [
    (1, "initial schema: sessions, messages, FTS5 (external content), CJK indexes, meta", _V1),
    (2, "sessions.user_id: the conversation's user key (memory.scope: user)", _V2),
    (3, "message_vectors: embeddings for semantic search, filled in the background", _V3),
    (4, "facts and fact_sources: memory derived from settled turns (session_archive.derive)",
     _V4),
    (5, "message_vectors.model and text_hash: each vector names its model and text", _V5),
    (6, "term_impacts, term_bounds: the best messages of the commonest words (impacts.py)",
     _V6),
]

LATEST_VERSION = MIGRATIONS[-1][0]


def register_functions(con: sqlite3.Connection) -> None:
    """The SQL functions the CJK triggers call; needed on every connection that writes."""
    con.create_function("hc_cjk_runs", 2, cjk_runs, deterministic=True)
    con.create_function("hc_cjk_grams", 2, cjk_grams, deterministic=True)


def migrate(
    con: sqlite3.Connection,
    begin: Callable[[], None],
    migrations: Sequence[Migration] | None = None,
) -> list[int]:
    """Apply the migrations newer than the file's version; return the versions applied.

    ``begin`` opens a write transaction (with the archive's busy handling). The version is read
    again inside it, so two processes opening an old file at once migrate it once.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    latest = migrations[-1][0]
    applied: list[int] = []
    if con.execute("PRAGMA user_version").fetchone()[0] >= latest:
        return applied
    begin()
    try:
        current = con.execute("PRAGMA user_version").fetchone()[0]
        for version, description, step in migrations:
            if version <= current:
                continue
            if callable(step):
                step(con)
            else:
                for statement in step:
                    con.execute(statement)
            con.execute(f"PRAGMA user_version = {int(version)}")
            applied.append(version)
            _set_meta(con, "schema_version", str(version))
            _set_meta(con, f"migration_{version}", f"{time.time():.3f} {description}")
        if current == 0:
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            _set_meta(con, "created_at", f"{time.time():.3f}")
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise
    return applied


def _set_meta(con: sqlite3.Connection, key: str, value: str) -> None:
    con.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value),
    )
