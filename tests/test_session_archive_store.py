"""The session archive's store: schema and migrations, sessions and lineage, bad input, a corrupt
or foreign state.db (never modified), export/import, and several writer processes at once."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from archive_support import make_archive

from hermes_core.plugins.memory.session_archive import (
    ArchiveCorruptError,
    ArchiveError,
    ArchiveVersionError,
    ImportFormatError,
    SessionArchive,
    SessionNotFoundError,
    schema,
    search_messages,
)
from hermes_core.plugins.memory.session_archive import db as db_module
from hermes_core.plugins.memory.session_archive.transfer import export_session, import_jsonl
from hermes_core.types import Message, Session, ToolCall, Usage


@pytest.fixture
def archive(tmp_path: Path, storage_url: str | None):
    """The archive on each backend: the SQLite file, then a PostgreSQL database."""
    a = make_archive(tmp_path, storage_url)
    yield a
    a.close()


@pytest.fixture
def sqlite_archive(tmp_path: Path):
    """Tests of the SQLite file itself (PRAGMAs, WAL, the file's identity)."""
    a = SessionArchive(tmp_path / "state.db")
    yield a
    a.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- schema


def test_new_file_has_the_schema_wal_and_identity(sqlite_archive: SessionArchive) -> None:
    archive = sqlite_archive
    con = sqlite3.connect(archive.path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == schema.LATEST_VERSION
    assert con.execute("PRAGMA application_id").fetchone()[0] == schema.APPLICATION_ID
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    assert meta["schema_version"] == str(schema.LATEST_VERSION)
    # external content: the FTS table keeps no copy of the text
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "messages_fts_content" not in tables and "messages_cjk_content" not in tables
    con.close()


def test_forward_migration_runs_once_and_keeps_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        a.append_message("old", Message("user", "written by version one"))
    nxt = schema.LATEST_VERSION + 1
    v_next = (nxt, "add a column",
              ["ALTER TABLE sessions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"])
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, v_next])
    monkeypatch.setattr(db_module, "LATEST_VERSION", nxt)
    with SessionArchive(path) as a:
        assert a.db.read("PRAGMA user_version")[0][0] == nxt
        assert a.db.read("SELECT pinned FROM sessions WHERE id = 'old'") == [(0,)]
        assert [m.content for m in a.messages("old")] == ["written by version one"]
        assert f"migration_{nxt}" in dict(a.db.read("SELECT key, value FROM meta"))
    with SessionArchive(path) as a:  # idempotent
        assert a.db.read("PRAGMA user_version")[0][0] == nxt


def test_a_version_1_file_gains_user_ids_from_its_attributes(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        a.open_session(Session(id="a1", attributes={"user_id": "alice"}))
        a.open_session(Session(id="n1"))
        a.append_message("a1", Message("user", "alice likes tea"))
    # turn it back into a version-1 file: no user_id column, no vector table, no facts tables
    con = sqlite3.connect(path)
    con.execute("DROP TRIGGER facts_message_ad")
    con.execute("DROP TABLE facts")
    con.execute("DROP TABLE fact_sources")
    con.execute("DROP TRIGGER message_vectors_ad")
    con.execute("DROP TABLE message_vectors")
    con.execute("DROP INDEX sessions_user")
    con.execute("ALTER TABLE sessions DROP COLUMN user_id")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    with SessionArchive(path) as a:
        assert a.db.read("PRAGMA user_version")[0][0] == schema.LATEST_VERSION
        assert [r.id for r in a.list_sessions(user="alice")] == ["a1"]
        assert [r.id for r in a.list_sessions(user="")] == ["n1"]
        assert search_messages(a, "tea", user="alice").hits
        assert not search_messages(a, "tea", user="bob").hits


def test_a_failing_migration_leaves_the_file_at_the_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.db"
    SessionArchive(path).close()
    nxt = schema.LATEST_VERSION + 1
    bad = (nxt, "broken", ["ALTER TABLE sessions ADD COLUMN x INTEGER", "SELECT * FROM nowhere"])
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, bad])
    monkeypatch.setattr(db_module, "LATEST_VERSION", nxt)
    with pytest.raises(ArchiveError, match="rolled back and the file is as it was"):
        SessionArchive(path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == nxt - 1
    cols = [r[1] for r in con.execute("PRAGMA table_info(sessions)")]
    assert "x" not in cols
    con.close()


def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SessionArchive(path).close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 99")
    con.close()
    before = digest(path)
    with pytest.raises(ArchiveVersionError, match="upgrade hermes-core"):
        SessionArchive(path)
    assert digest(path) == before


# ---------------------------------------------------------------------------- corrupt files


def test_a_file_that_is_not_sqlite_is_refused_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is my diary, not a database\n" * 100)
    before = digest(path)
    with pytest.raises(ArchiveCorruptError, match=r"left untouched.*doctor"):
        SessionArchive(path)
    assert digest(path) == before
    assert not Path(f"{path}-wal").exists()


def test_a_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE recipes (name TEXT)")
    con.commit()
    con.close()
    before = digest(path)
    with pytest.raises(ArchiveCorruptError, match="not a hermes-core archive"):
        SessionArchive(path)
    assert digest(path) == before


def test_damaged_pages_give_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        for i in range(300):
            a.append_message("s", Message("user", f"message {i} about the quarterly report " * 20))
    data = bytearray(path.read_bytes())
    page = 4096
    for p in range(3, len(data) // page - 1):  # trash every page but the schema
        data[p * page : p * page + 200] = b"\xff" * 200
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(ArchiveCorruptError, match="left untouched"):
        a = SessionArchive(path)
        try:
            a.list_sessions()
            search_messages(a, "quarterly report")
            a.messages("s")
        finally:
            a.close()
    assert digest(path) == before


# --------------------------------------------------------------------------------- sessions


def test_compaction_chain_titles_listing_and_lineage(archive: SessionArchive) -> None:
    archive.open_session(Session(id="a", title="Deploy notes", platform="cli"))
    archive.append_message("a", Message("user", "first"))
    archive.open_session(Session(id="b", parent_session_id="a"), origin="compression")
    archive.open_session(Session(id="c", parent_session_id="b"), origin="compression")
    archive.append_message("c", Message("user", "third"))
    archive.open_session(Session(id="other", title="Other"), origin="new")
    archive.open_session(Session(id="branch", parent_session_id="c"), origin="branch")
    assert [archive.get_session(s).title for s in "abc"] == [
        "Deploy notes", "Deploy notes #2", "Deploy notes #3"]
    listed = {r.id: r for r in archive.list_sessions()}
    assert set(listed) == {"c", "other", "branch"}  # the chain a-b-c shows as its newest
    assert listed["c"].chain_length == 3 and listed["c"].chain_root == "a"
    assert listed["c"].chain_messages == 2 and listed["c"].preview == "first"
    assert {r.id for r in archive.list_sessions(chains=False)} == {
        "a", "b", "c", "other", "branch"}
    assert set(archive.lineage("b")) == {"a", "b", "c", "branch"}
    assert set(archive.lineage("other")) == {"other"}
    assert {r.id for r in archive.list_sessions(exclude_lineage_of="b")} == {"other"}
    archive.set_title("b", "Release #7")
    assert [archive.get_session(s).title for s in "abc"] == ["Release", "Release #2", "Release #3"]
    assert archive.chain_of("c") == ["a", "b", "c"]


def test_a_child_created_by_its_first_message_follows_the_later_switch(
    archive: SessionArchive,
) -> None:
    # on_message runs on the turn's thread; on_session_switch arrives later from the worker
    archive.open_session(Session(id="p", title="Plan"))
    archive.append_message(Session(id="k", parent_session_id="p"), Message("user", "hi"))
    assert archive.get_session("k").title == "Plan #2" and archive.get_session("p").superseded
    assert not archive.open_session(Session(id="k", parent_session_id="p"), origin="compression")
    assert archive.get_session("k").origin == "compression"
    archive.append_message(Session(id="b", parent_session_id="p"), Message("user", "fork"))
    archive.open_session(Session(id="b", parent_session_id="p"), origin="branch")
    b = archive.get_session("b")
    assert (b.origin, b.title, b.chain_root) == ("branch", "Plan", "b")
    assert archive.get_session("p").superseded  # still continued by k
    assert {r.id for r in archive.list_sessions()} == {"k", "b"}


def test_carried_over_copies_are_stored_but_found_once(archive: SessionArchive) -> None:
    archive.open_session(Session(id="old"))
    archive.append_message("old", Message("user", "the walrus plan"))
    child = Session(id="new", parent_session_id="old")
    archive.append_message(child, Message("user", "summary of earlier turns"))
    archive.append_message(child, Message("user", "the walrus plan", meta={"carried_over": "old"}))
    assert [m.content for m in archive.messages("new")][-1] == "the walrus plan"
    hits = search_messages(archive, "walrus").hits
    assert [h.session_id for h in hits] == ["old"]
    if getattr(archive, "backend", "sqlite") == "sqlite":
        archive.db.read("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")


def test_lineage_survives_a_cycle(archive: SessionArchive) -> None:
    archive.open_session(Session(id="x", parent_session_id="y"))
    archive.open_session(Session(id="y", parent_session_id="x"))
    assert set(archive.lineage("x")) == {"x", "y"}


def test_a_message_and_its_usage_are_one_write(archive: SessionArchive) -> None:
    """append_message(usage=...) stores the message and adds the call to the session's
    counters together: first creating the session, then on a session the archive knows (on
    PostgreSQL one statement), as record_usage after each append would."""
    archive.append_message("u", Message("assistant", "first"),
                           usage=Usage(input_tokens=10, output_tokens=2, model="claude-x"))
    archive.append_message("u", Message("assistant", "second"),
                           usage=Usage(input_tokens=5, output_tokens=1, cache_read_tokens=3))
    archive.append_message("u", Message("user", "no call"))
    rec = archive.get_session("u")
    assert (rec.input_tokens, rec.output_tokens, rec.cache_read_tokens, rec.api_calls,
            rec.model, rec.message_count) == (15, 3, 3, 2, "claude-x", 3)
    assert [m.content for m in archive.messages("u")] == ["first", "second", "no call"]


def test_end_reopen_usage_and_missing_sessions(archive: SessionArchive) -> None:
    archive.open_session("s")
    archive.record_usage("s", Usage(input_tokens=100, output_tokens=20, cache_read_tokens=5,
                                    cache_write_tokens=7, model="claude-x"), cost_usd=0.25)
    archive.record_usage("s", Usage(input_tokens=1, output_tokens=2), cost_usd=0.5)
    archive.end_session("s", "user_exit", ended_at=123.0)
    rec = archive.get_session("s")
    assert (rec.input_tokens, rec.output_tokens, rec.cache_read_tokens,
            rec.cache_write_tokens, rec.api_calls) == (101, 22, 5, 7, 2)
    assert rec.cost_usd == pytest.approx(0.75) and rec.model == "claude-x"
    assert (rec.ended_at, rec.end_reason) == (123.0, "user_exit")
    archive.reopen_session("s")
    assert archive.get_session("s").ended_at is None
    with pytest.raises(SessionNotFoundError, match="sessions list"):
        archive.end_session("nope", "user_exit")
    with pytest.raises(SessionNotFoundError):
        archive.messages("nope")


def test_messages_round_trip_with_tool_calls(archive: SessionArchive) -> None:
    s = Session(id="rt", platform="webhook", model="m")
    archive.append_message(s, Message("user", "read it", timestamp=10.0))
    archive.append_message(s, Message("assistant", "", tool_calls=[
        ToolCall("toolu_1", "read_file", {"path": "/a.py", "n": [1, 2]})], timestamp=11.0))
    archive.append_message(s, Message("tool", "print(1)", tool_call_id="toolu_1",
                                      tool_name="read_file", meta={"k": "v"}, timestamp=12.0))
    msgs = archive.messages("rt")
    assert [m.role for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[1].tool_calls == [{"id": "toolu_1", "name": "read_file",
                                   "arguments": {"path": "/a.py", "n": [1, 2]}}]
    back = msgs[1].to_message()
    assert back.tool_calls[0].name == "read_file" and back.tool_calls[0].arguments["n"] == [1, 2]
    assert msgs[2].meta == {"k": "v"} and msgs[2].tool_call_id == "toolu_1"
    assert archive.get_session("rt").platform == "webhook"
    assert archive.get_session("rt").message_count == 3


# -------------------------------------------------------------------------------- bad input


def test_a_10mb_message_is_stored_whole_and_found(archive: SessionArchive) -> None:
    big = ("lorem ipsum dolor " * 600_000)[:10_000_000] + " needleword at the very end"
    archive.append_message("big", Message("tool", big, tool_name="terminal"))
    (stored,) = archive.messages("big")
    assert len(stored.content) == len(big) and stored.content == big
    hits = search_messages(archive, "needleword").hits
    assert hits and "needleword" in hits[0].snippet


def test_nul_bytes_are_kept_and_searchable(archive: SessionArchive) -> None:
    text = "before\x00after the nul zebra"
    archive.append_message("nul", Message("user", text))
    assert archive.messages("nul")[0].content == text
    assert search_messages(archive, "zebra").hits


def test_lone_surrogates_are_repaired_and_noted(archive: SessionArchive) -> None:
    archive.append_message("sur", Message("user", "broken \ud800 text kiwi", tool_name="x\udfff"))
    (m,) = archive.messages("sur")
    assert m.content == "broken \ufffd text kiwi" and m.tool_name == "x\ufffd"
    assert m.meta["_archive_repairs"] == 2
    assert search_messages(archive, "kiwi").hits
    # a surrogate pair split into two code units is joined back, not replaced
    archive.append_message("sur", Message("user", "smile \ud83d\ude00"))
    assert archive.messages("sur")[1].content == "smile \U0001f600"


def test_malformed_tool_call_arguments_are_kept_verbatim(archive: SessionArchive) -> None:
    raw = '{"path": "/etc/hosts", "unterminated'
    archive.append_message("tc", Message("assistant", "", tool_calls=[
        ToolCall("t1", "read_file", raw),  # type: ignore[arg-type]
        ToolCall("t2", "odd", {"when": {1, 2}, "blob": b"\x00\x01"}),
    ]))
    (m,) = archive.messages("tc")
    assert m.tool_calls[0]["arguments"] == raw
    assert isinstance(m.tool_calls[1]["arguments"]["when"], str)
    assert search_messages(archive, "hosts").hits  # the raw text is still indexed


def test_an_unknown_role_is_refused_with_the_fix(archive: SessionArchive) -> None:
    with pytest.raises(ValueError, match="not one of system, user, assistant, tool"):
        archive.append_message("r", Message("robot", "beep"))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- export / import


def test_export_import_round_trip_and_resume(archive: SessionArchive, tmp_path: Path) -> None:
    archive.open_session(Session(id="p", title="Trip", platform="cli", model="m1"))
    archive.append_message("p", Message("user", "book the hotel", timestamp=5.0))
    archive.open_session(Session(id="q", parent_session_id="p"), origin="compression")
    archive.append_message("q", Message("assistant", "", tool_calls=[
        ToolCall("t", "book", {"hotel": "Ritz 東京"})], timestamp=6.0))
    archive.record_usage("q", Usage(input_tokens=9), cost_usd=0.1)
    archive.end_session("q", "user_exit", ended_at=7.0)
    out = tmp_path / "export.jsonl"
    with open(out, "w", encoding="utf-8") as fh:
        assert export_session(archive, archive.chain_of("q"), fh) == 4
    with SessionArchive(tmp_path / "other.db") as other:
        report = import_jsonl(other, out)
        assert (report.sessions_imported, report.messages_imported) == (2, 2)
        q = other.get_session("q")
        assert (q.title, q.parent_session_id, q.origin, q.input_tokens, q.end_reason) == (
            "Trip #2", "p", "compression", 9, "user_exit")
        assert other.get_session("p").superseded
        assert other.messages("q")[0].tool_calls[0]["arguments"] == {"hotel": "Ritz 東京"}
        assert search_messages(other, "東京").hits
        again = import_jsonl(other, out)
        assert (again.sessions_imported, again.sessions_skipped) == (0, 2)


GOOD = '{"type": "session", "id": "ok"}\n{"type": "message", "role": "user", "content": "hi"}\n'
Z = '{"type": "session", "id": "z"}\n'


@pytest.mark.parametrize(("text", "error", "before"), [
    (GOOD + Z + "{not json\n", "line 4: not valid JSON", 1),
    (GOOD + "{not json\n", "line 3: not valid JSON", 0),  # it may belong to "ok": not written
    ('{"type": "message", "role": "user", "content": "x"}\n', "line 1: .*before any session", 0),
    (GOOD + Z + '{"type": "message", "role": "robot"}\n', "line 4: 'role' must be", 1),
    (GOOD + Z + '{"type": "message", "role": "user", "tool_calls": 3}\n', "'tool_calls' must", 1),
    (GOOD + Z + '{"type": "message", "role": "user", "content": 5}\n', "'content' must be", 1),
    (GOOD + Z + '{"type": "message", "session_id": "ok", "role": "user"}\n', "inside session", 1),
    (GOOD + "[1, 2]\n", "line 3: expected an object", 0),
    (GOOD + '{"type": "session", "id": ""}\n', "non-empty string 'id'", 1),
])
def test_a_malformed_import_line_names_the_line_and_keeps_earlier_sessions(
    archive: SessionArchive, tmp_path: Path, text: str, error: str, before: int
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFormatError, match=rf"bad\.jsonl, .*{error}") as info:
        import_jsonl(archive, path)
    assert f"{before} session(s) before it were" in str(info.value)
    assert archive.has_session("ok") == bool(before)
    assert not archive.has_session("z")
    if before:
        assert [m.content for m in archive.messages("ok")] == ["hi"]
    path.write_text(GOOD, encoding="utf-8")  # fixed: the import finishes, skipping what it has
    report = import_jsonl(archive, path)
    assert report.sessions_imported + report.sessions_skipped == 1


# ------------------------------------------------------------------------- concurrent writers

WRITER = textwrap.dedent("""
    import sys, time
    from hermes_core.plugins.memory.session_archive import SessionArchive
    from hermes_core.types import Message
    path, n, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    a = SessionArchive(path, busy_timeout=60)
    while time.time() < start:
        time.sleep(0.001)
    for i in range(1000):
        a.append_message(f"writer-{n}", Message("user", f"writer{n} message {i} token w{n}x{i}"))
    a.close()
""")


def test_four_writer_processes_lose_nothing(tmp_path: Path) -> None:
    import time

    path = tmp_path / "state.db"
    SessionArchive(path).close()
    start = time.time() + 1.5  # all four start appending at the same moment
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(n), str(start)],
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    assert not any("locked" in e for e in errors)
    with SessionArchive(path) as a:
        assert a.count_messages() == 4000
        for n in range(4):
            contents = [m.content for m in a.messages(f"writer-{n}")]
            assert contents == [f"writer{n} message {i} token w{n}x{i}" for i in range(1000)]
            assert a.get_session(f"writer-{n}").message_count == 1000
            assert search_messages(a, f"w{n}x999").hits[0].session_id == f"writer-{n}"
        a.db.read("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")


def test_threads_append_and_search_at_once(archive: SessionArchive) -> None:
    import threading

    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(200):
                archive.append_message(f"t{n}", Message("user", f"thread{n} item{i} heron"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(50):
                search_messages(archive, "heron")
                archive.list_sessions()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert archive.count_messages() == 800


def test_a_lock_held_too_long_is_a_clear_error_and_the_message_waits_in_the_spool(
    tmp_path: Path,
) -> None:
    from hermes_core.plugins.memory.session_archive import ArchiveWriteError

    path = tmp_path / "state.db"
    with SessionArchive(path, busy_timeout=0.3) as a:
        a.append_message("s", Message("user", "first"))
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        with pytest.raises(ArchiveWriteError, match=r"(?i)locked.*busy_timeout.*kept in"):
            a.append_message("s", Message("user", "second"))
        with pytest.raises(ArchiveWriteError, match="kept in"):
            a.append_message("new-session", Message("user", "third"))
        other.execute("ROLLBACK")
        other.close()
        a.append_message("s", Message("user", "after"))
        assert [m.content for m in a.messages("s")] == ["first", "second", "after"]
        assert [m.content for m in a.messages("new-session")] == ["third"]
        assert not a.spool.has_pending()
