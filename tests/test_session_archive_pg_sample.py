"""PostgreSQL archive search: every match ranked (ts_rank_cd, top-N in one statement), whatever
the number of matches; the exclusions inside the same statement."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hermes_core.plugins.memory.session_archive.query import build_query
from hermes_core.plugins.memory.session_archive.search import candidates as candidates_of
from hermes_core.plugins.memory.session_archive.search import search_messages, tsquery_text
from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
from hermes_core.storage import parse_storage_url
from hermes_core.types import Message


@pytest.fixture
def pg_archive(pg_url: str) -> Iterator[PgSessionArchive]:
    archive = PgSessionArchive(parse_storage_url(pg_url))
    # 1,200 messages in 30 sessions; "harbour" is in every third, "lighthouse" in 12 messages
    for s in range(30):
        archive.append_messages(f"s{s:02d}", [
            Message("user", f"message {s}-{i} about the " + ("harbour crane " if i % 3 == 0 else "")
                    + ("lighthouse keeper " if i == 7 and s < 12 else "") + "and the weather")
            for i in range(40)])
    yield archive
    archive.close()


def candidates(archive: PgSessionArchive, text: str, limit: int, **kw: object) -> list[int]:
    found = candidates_of(archive, build_query(text), limit=limit, **kw)  # type: ignore[arg-type]
    return [c.id for c in found]


def every_match(archive: PgSessionArchive, text: str) -> list[int]:
    """The reference: every match's ts_rank_cd, sorted here (best first, ties newest first)."""
    rows = archive.db.read("SELECT id, ts_rank_cd(tsv, to_tsquery('english', :q)) FROM messages "
                           "WHERE tsv @@ to_tsquery('english', :q)",
                           {"q": tsquery_text(build_query(text).strict or "")})
    return [int(r[0]) for r in sorted(rows, key=lambda r: (-float(r[1]), -int(r[0])))]


def test_migrations_3_and_5_shape_the_table(pg_archive: PgSessionArchive) -> None:
    names = {r[0] for r in pg_archive.db.read(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'messages'")}
    assert {"messages_tsv_bucket", "messages_cjk_runs"} <= names
    assert "messages_tsv" not in names  # the two-column index answers word-only queries too
    assert pg_archive.db.read("SELECT version FROM hermes_schema WHERE component = "
                              "'session_archive'")[0][0] >= 5
    # migration 5: the tsvector stays in the row (ranking reads no TOAST), frequent vacuums
    storage = pg_archive.db.read("SELECT attstorage FROM pg_attribute WHERE attrelid = "
                                 "'messages'::regclass AND attname = 'tsv'")[0][0]
    assert storage == "m"
    options = pg_archive.db.read("SELECT reloptions FROM pg_class WHERE relname = 'messages'")
    assert "autovacuum_vacuum_insert_scale_factor=0.02" in options[0][0]


def test_a_long_message_keeps_its_search_vector_in_the_row(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """Ranking reads every match's tsvector: a long message's content goes out of line (TOAST),
    its tsvector stays in the row (before migration 5 the tsvector, the largest value, went
    out first)."""
    words = " ".join(f"w{i:04d}q{(i * 7919) % 10007}" for i in range(300))  # tsvector ~4.5 kB
    pg_archive.append_message("long", Message("tool", words, tool_name="terminal"))
    toast = pg_archive.db.read("SELECT reltoastrelid::regclass::text FROM pg_class "
                               "WHERE relname = 'messages'")[0][0]
    chunks = pg_archive.db.read(f"SELECT chunk_id, sum(octet_length(chunk_data)) FROM {toast} "
                                "GROUP BY chunk_id")
    content_size = pg_archive.db.read("SELECT pg_column_size(content) FROM messages "
                                      "ORDER BY id DESC LIMIT 1")[0][0]
    assert len(chunks) == 1 and abs(int(chunks[0][1]) - int(content_size)) <= 16
    ids = candidates(pg_archive, "w0299q" + str((299 * 7919) % 10007), limit=50)
    assert len(ids) == 1


@pytest.mark.parametrize(("text", "limit"), [("lighthouse", 50), ("harbour", 500),
                                             ("harbour", 100), ("harbour crane", 37),
                                             ("harbour OR lighthouse", 60)])
def test_the_best_matches_of_all_of_them_are_returned(pg_archive, text: str, limit: int) -> None:  # type: ignore[no-untyped-def]
    """Fewer matches than the limit: all of them; more: the best ``limit`` of every match (420
    match "harbour"), never a sample."""
    assert candidates(pg_archive, text, limit) == every_match(pg_archive, text)[:limit]


def test_exclusions_apply_before_the_top_n(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """The lineage, roles and -word exclusions are part of the ranking statement: the limit
    counts what is left after them."""
    ids = candidates(pg_archive, "harbour", 50, exclude_lineage_of="s29")
    s29 = {r[0] for r in pg_archive.db.read(
        "SELECT m.id FROM messages AS m JOIN sessions AS s ON s.num = m.session "
        "WHERE s.id = 's29'")}
    assert len(ids) == 50 and not set(ids) & s29
    assert ids == [i for i in every_match(pg_archive, "harbour") if i not in s29][:50]
    assert candidates(pg_archive, "harbour", 50, roles=("assistant",)) == []
    assert candidates(pg_archive, "harbour -lighthouse", 1000) == [
        i for i in every_match(pg_archive, "harbour") if i not in set(
            every_match(pg_archive, "lighthouse"))]


def test_stopwords_only_are_matched_as_substrings_newest_first(pg_archive) -> None:  # type: ignore[no-untyped-def]
    ids = candidates(pg_archive, "the", 100)
    assert ids == sorted(ids, reverse=True) and len(ids) == 100
    newest = pg_archive.db.read("SELECT max(id) FROM messages")[0][0]
    assert ids[0] == newest
    pg_archive.append_messages("late", [Message("user", "whom")])
    assert len(candidates(pg_archive, "whom", 1000)) == 1


def test_carried_over_copies_stay_out_of_every_path(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """The text and CJK matches no longer check the carried-over mark themselves (the copies
    have no tsv and no cjk); the substring match still does."""
    pg_archive.append_message("old", Message("user", "walrus 部署计划 whom"))
    pg_archive.append_message("new", Message("user", "walrus 部署计划 whom",
                                             meta={"carried_over": "old"}))
    for text in ("walrus", "部署计划", "部署", "whom"):
        ids = candidates(pg_archive, text, limit=1000)
        assert len(ids) == 1, text


def test_an_append_never_uses_a_session_row_not_yet_committed(pg_url: str) -> None:
    """A session another thread is creating (its transaction not committed yet) is not in the id
    cache: an append to it waits for that row instead of inserting against a missing session
    (a foreign-key error, and a message that was not stored)."""
    import threading

    from hermes_core.types import Session

    archive = PgSessionArchive(parse_storage_url(pg_url))
    created, release = threading.Event(), threading.Event()

    class Watched:
        """The archive's re-entrant writer lock, saying when another thread waits for it."""

        def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
            self.inner, self.waiting = inner, threading.Event()

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            if self.inner.acquire(blocking=False):
                return True
            self.waiting.set()
            return self.inner.acquire(blocking, timeout)

        def release(self) -> None:
            self.inner.release()

        def __enter__(self) -> None:
            self.acquire()

        def __exit__(self, *exc: object) -> None:
            self.release()

    lock = archive.db.lock = Watched(archive.db.lock)

    def opening(con) -> None:  # type: ignore[no-untyped-def]
        archive._create_from(con, Session(id="s-new", platform="webhook"))
        created.set()
        release.wait(10)  # the transaction stays open while the other thread appends

    opener = threading.Thread(target=archive._write, args=(opening,))
    opener.start()
    assert created.wait(10)
    errors: list[BaseException] = []

    def append() -> None:
        try:
            archive.append_message("s-new", Message("user", "while it was being created"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    appender = threading.Thread(target=append)
    appender.start()
    # until the append waits for the opener (on the archive's writer lock), or has ended
    for _ in range(3000):  # bounded: 30 s
        if not appender.is_alive() or lock.waiting.wait(0.01):
            break
    release.set()
    opener.join(10)
    appender.join(10)
    assert errors == []
    assert [m.content for m in archive.messages("s-new")] == ["while it was being created"]
    archive.close()


def test_search_tool_echoes_are_left_out_of_every_path(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """The search tools' own call and output are no candidates: ranked word matches test the
    row in the ranking statement, CJK runs and substrings are checked after reading."""
    from hermes_core.types import ToolCall

    call = ToolCall(id="c1", name="session_search", arguments={"query": "zebrafish 部署计划"})
    pg_archive.append_messages("echo", [
        Message("user", "what about the quokka"),
        Message("assistant", "zebrafish 部署计划 whom", tool_calls=[call]),
        Message("tool", "zebrafish habitat 部署计划 whom", tool_name="session_search",
                tool_call_id="c1"),
        Message("tool", "a context_search result: zebrafish", tool_name="context_search"),
    ])
    pg_archive.append_messages("real", [Message("user", "zebrafish 部署计划 whom, a long one "
                                                + "padding " * 200)])
    real = {r[0] for r in pg_archive.db.read(
        "SELECT m.id FROM messages AS m JOIN sessions AS s ON s.num = m.session "
        "WHERE s.id = 'real'")}
    for text in ("zebrafish", "zebrafish OR walrus", "部署计划", "部署", "whom"):
        ids = candidates(pg_archive, text, limit=1000)
        assert set(ids) == real, text
    # both words only in the echo: the any-word fallback finds the real message alone
    assert {h.session_id for h in search_messages(pg_archive, "zebrafish habitat").hits} == {
        "real"}
    assert [h.session_id for h in search_messages(pg_archive, "quokka").hits] == ["echo"]


def test_several_reads_in_one_round_trip(pg_archive) -> None:  # type: ignore[no-untyped-def]
    """read_many answers each statement as read does; read_with's settings hold for its query
    alone (sent with it in one round trip)."""
    db = pg_archive.db
    statements = [("SELECT count(*) FROM messages WHERE tsv @@ to_tsquery('english', :q)",
                   {"q": "lighthouse"}), ("SELECT min(id), max(id) FROM messages", ()),
                  ("SELECT id FROM messages WHERE id < 0", ())]
    assert db.read_many(statements) == [db.read(sql, params) for sql, params in statements]
    assert db.read_with({"work_mem": "7MB"}, "SELECT current_setting('work_mem')") == [("7MB",)]
    assert db.read("SELECT current_setting('work_mem')") != [("7MB",)]
    # a failing statement fails the batch with the archive's error; the connection stays usable
    from hermes_core.plugins.memory.session_archive.errors import ArchiveError

    for _ in range(3):  # more times than the pool has connections to hand out
        with pytest.raises(ArchiveError, match="division by zero"):
            db.read_many([("SELECT 1", ()), ("SELECT 1 / 0", ()), ("SELECT 2", ())])
    assert db.read_many([("SELECT 1", ()), ("SELECT 2", ())]) == [[(1,)], [(2,)]]
    for _ in range(3):
        with pytest.raises(ArchiveError, match="division by zero"):
            db.read_with({"work_mem": "7MB"}, "SELECT 1 / 0")
    assert db.read("SELECT current_setting('work_mem')") != [("7MB",)]
    assert db.read("SELECT 3") == [(3,)]


@pytest.mark.parametrize("text", ["deploym*", "deployme*", "harbou*", "lightho*"])
def test_prefixes_past_the_porter_stem_on_postgresql(pg_archive, text: str) -> None:  # type: ignore[no-untyped-def]
    """A prefix longer than the stored stem ("deploym*": "deployment" is stored as "deploy") is
    widened by the words the index holds, as on SQLite; the lookup used SQLite's syntax and
    failed every prefix search on PostgreSQL."""
    pg_archive.append_messages("deploy", [Message("user", "the deployment of the billing service")])
    hits = search_messages(pg_archive, text).hits
    assert hits
    if text.startswith("deploy"):
        assert {h.session_id for h in hits} == {"deploy"}
