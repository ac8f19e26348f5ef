"""The stores added to the database (skills, lossless archive, memory history): their schemas
are versioned components like the others; bad databases are refused and left untouched.

Real PostgreSQL (the pg_url fixture); no mock of the database.
"""

from __future__ import annotations

import psycopg
import pytest
from pg_support import drop_connections, settle_pool

from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
from hermes_core.plugins.memory.file_memory import pg_store
from hermes_core.plugins.memory.file_memory.pg_store import PgMemoryStore
from hermes_core.plugins.memory.file_memory.versions import rollback
from hermes_core.plugins.memory.skills.pg_library import PgSkillLibrary
from hermes_core.storage import (
    StorageForeignError,
    StorageVersionError,
    close_pools,
    get_pool,
    parse_storage_url,
)
from hermes_core.storage.migrations import migrate, schema_versions
from hermes_core.storage.text import decode_text, encode_text


def test_nul_safe_text_round_trips() -> None:
    for text in ("plain", "a\x00b", "\U0010fffe", "\U0010fffe0\x00\U0010fffe1", ""):
        stored = encode_text(text)
        assert "\x00" not in stored and decode_text(stored) == text


@pytest.mark.parametrize("opener", [
    lambda url: PgSkillLibrary(url),
    lambda url: PgSpanStore(url),
    lambda url: PgMemoryStore(url),
], ids=["skills", "lossless", "file_memory"])
def test_a_foreign_database_is_refused_and_left_alone(pg_url: str, opener) -> None:
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE TABLE customers (id int)")
    with pytest.raises(StorageForeignError, match=r"customers.*empty database") as caught:
        opener(parse_storage_url(pg_url))
    assert "hermes-test" not in str(caught.value)
    with psycopg.connect(pg_url) as con:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")}
    assert tables == {"customers"}


def test_file_memory_schema_1_is_migrated_forward_keeping_its_documents(pg_url: str) -> None:
    """A database made by the previous release (memory documents, no history) gains the
    history tables on first open; its documents are kept and new writes are versioned."""
    url = parse_storage_url(pg_url)
    pool = get_pool(url)
    with pool.connection() as con:
        migrate(con, url, pg_store.COMPONENT, pg_store.MIGRATIONS[:1])
        con.execute("INSERT INTO memory_documents(owner, target, text) VALUES "
                    "('', 'user', 'Name: Ana')")
    store = PgMemoryStore(url)
    with pool.connection() as con:
        assert schema_versions(con)["file_memory"] == 2
    assert store.read("user").entries == ["Name: Ana"]
    store.add("user", "Lives in Lisbon")
    (first,) = store.history.read()  # type: ignore[union-attr]
    assert first.stores["user"] == {"before": "Name: Ana\n",
                                    "after": "Name: Ana\n§\nLives in Lisbon\n"}
    store.add("user", "Likes tea")
    rollback(store, 1)
    assert store.read("user").entries == ["Name: Ana", "Lives in Lisbon"]


def test_a_newer_memory_schema_is_refused_and_left_alone(pg_url: str) -> None:
    url = parse_storage_url(pg_url)
    PgMemoryStore(url).add("memory", "keep me")
    close_pools()
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("UPDATE hermes_schema SET version = 3 WHERE component = 'file_memory'")
    with pytest.raises(StorageVersionError, match=r"file_memory schema .* version 3"):
        PgMemoryStore(url)
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT text FROM memory_documents").fetchone() == ("keep me",)


def test_the_server_going_away_mid_work_loses_nothing_and_half_writes_nothing(
    tmp_path, pg_url: str
) -> None:
    from compressor_support import build_history, make_context

    from hermes_core.plugins.context_engine.lossless import LosslessConfig, LosslessEngine
    from hermes_core.plugins.memory.file_memory.errors import WriteFailed
    from hermes_core.types import Session

    url = parse_storage_url(pg_url)
    memory = PgMemoryStore(url)
    memory.add("memory", "before the outage")
    context = make_context(tmp_path, window=60_000)
    context.config.storage.url = pg_url
    engine = LosslessEngine(LosslessConfig(), context)
    engine.bind_session(Session(id="s1"))
    history = build_history(60, seed=31)
    settle_pool(get_pool(url))  # no connection still opening that would outlive the drop
    assert drop_connections(pg_url) >= 1
    # the memory write fails with a clear error naming the database (password hidden) ...
    with pytest.raises(WriteFailed) as caught:
        memory.add("memory", "during the outage")
    assert "hermes:***@127.0.0.1" in caught.value.message and "hermes-test" not in str(
        caught.value)
    # ... and the compaction leaves the history as it was instead of dropping turns
    settle_pool(get_pool(url))  # the failed write's pool check reopens connections meanwhile
    drop_connections(pg_url)
    result = engine.compact(history)
    assert result.messages == history and "archiving the compacted turns failed" in (
        result.notices[0])
    assert engine.store.count_spans(engine.conversation) == 0  # nothing half-written
    # the pool replaces the dead connections: the next calls go through, numbering intact
    memory.add("memory", "after the outage")
    assert [v.version for v in memory.history.read()] == [1, 2]  # type: ignore[union-attr]
    assert memory.read("memory").entries == ["before the outage", "after the outage"]
    assert engine.compact(history).messages != history
    assert engine.store.count_spans(engine.conversation) == 1


def test_reads_go_through_at_once_after_the_server_dropped_every_connection(
    pg_url: str
) -> None:
    url = parse_storage_url(pg_url)
    memory, skills = PgMemoryStore(url), PgSkillLibrary(url)
    spans = PgSpanStore(url)
    memory.add("user", "Name: Ana")
    skills.create("tea", "Make tea", "1. Boil water.")
    for read in (lambda: memory.read("user").entries, lambda: [s.name for s in skills.all()],
                 lambda: spans.count_spans("c"),
                 lambda: [v.version for v in memory.history.read()]):  # type: ignore[union-attr]
        before = read()
        # no connection still being opened (the last retry's pool check refills the pool in
        # the background) that would be handed out dead after the check
        settle_pool(get_pool(url))
        assert drop_connections(pg_url) >= 1
        assert read() == before  # a read is safe to repeat: retried on a fresh connection


def test_an_archive_append_the_server_did_not_take_is_not_stored_and_says_so(
    pg_url: str
) -> None:
    """No node keeps a PostgreSQL archive's messages on its own disk: an append the server did
    not take raises NotStored (the kernel then fails the turn) naming the database, password
    hidden, and nothing of it is half-written; the next append goes through."""
    from hermes_core.errors import NotStored
    from hermes_core.plugins.memory.session_archive import MessageNotStored
    from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
    from hermes_core.types import Message

    archive = PgSessionArchive(parse_storage_url(pg_url))
    archive.append_message("s-gone", Message("user", "before"))
    settle_pool(get_pool(pg_url))  # no connection still opening that would outlive the drop
    assert drop_connections(pg_url) >= 1
    with pytest.raises(MessageNotStored) as caught:
        archive.append_message("s-gone", Message("user", "during"))
    assert isinstance(caught.value, NotStored)
    assert "hermes:***@127.0.0.1" in str(caught.value) and "hermes-test" not in str(caught.value)
    assert "send it again" in str(caught.value) and "disk space" not in str(caught.value)
    archive.append_message("s-gone", Message("user", "after"))
    assert [m.content for m in archive.messages("s-gone")] == ["before", "after"]
    archive.close()
