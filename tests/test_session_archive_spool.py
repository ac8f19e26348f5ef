"""A failed archive write is never lost silently (issue 17 item 8).

Real disks are made to fail for real: SQLite's ``max_page_count`` (the database is full), a file
size limit (``RLIMIT_FSIZE``) in a subprocess (the OS refuses the write), a file damaged in its
middle pages, another connection holding the lock. Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_core.plugins.memory.session_archive import (
    ArchiveCorruptError,
    ArchiveWriteError,
    SessionArchive,
    SessionArchiveConfig,
    SessionArchiveProvider,
)
from hermes_core.plugins.memory.session_archive.records import spool_record
from hermes_core.testing import make_instance
from hermes_core.types import Message, Session, ToolCall

PAGE = 4096


def contents(archive: SessionArchive, sid: str) -> list[str]:
    return [str(m.content) for m in archive.messages(sid)]


def test_a_file_damaged_in_its_middle_pages_is_refused_at_open_with_advice(tmp_path: Path) -> None:
    """Before: such a file opened fine and then failed every append."""
    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        for i in range(400):
            a.append_message("s", Message("user", f"message {i} about the quarterly report " * 8))
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    assert pages > 20
    for p in (pages // 2, pages // 2 + 1):  # two pages in the middle, the schema intact
        data[p * PAGE : (p + 1) * PAGE] = os.urandom(PAGE)
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(ArchiveCorruptError) as info:
        SessionArchive(path)
    message = str(info.value)
    assert str(path) in message and "integrity check failed" in message
    assert "Keep the file" in message and ".recover" in message
    assert "fresh" not in message  # never advises starting over without the data
    assert path.read_bytes() == before


def test_a_full_database_spools_every_message_and_replays_them_in_order(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    archive = SessionArchive(path)
    archive.append_message(Session(id="s"), Message("user", "turn before"))
    con = archive.db.con
    used = con.execute("PRAGMA page_count").fetchone()[0]
    con.execute(f"PRAGMA max_page_count = {used}")  # the database cannot grow: "disk is full"
    failures = []
    for i in range(40):
        try:
            archive.append_message(Session(id="s"), Message("user", f"turn {i} " + "x" * 3000))
        except ArchiveWriteError as exc:
            failures.append(str(exc))
    assert failures, "the size limit never bit"
    assert all("disk is full" in f and "kept in" in f for f in failures)
    spooled = archive.spool.pending()
    assert len(spooled) == len(failures)
    con.execute("PRAGMA max_page_count = 1073741823")  # space again
    archive.append_message(Session(id="s"), Message("user", "turn after"))
    stored = contents(archive, "s")
    assert stored[0] == "turn before" and stored[-1] == "turn after"
    assert [s.split(" ", 2)[1] for s in stored[1:-1]] == [str(i) for i in range(40)]
    assert not archive.spool.has_pending()
    archive.close()


def test_the_os_refusing_writes_spools_and_the_next_open_stores_them(tmp_path: Path) -> None:
    """A file-size limit makes every write past it fail with EFBIG, as a full disk does."""
    path = tmp_path / "state.db"
    script = textwrap.dedent(
        """
        import json, os, resource, signal, sys
        from pathlib import Path
        from hermes_core.plugins.memory.session_archive import ArchiveWriteError, SessionArchive
        from hermes_core.types import Message, Session

        path = Path(sys.argv[1])
        archive = SessionArchive(path)
        archive.append_message(Session(id="s"), Message("user", "before the disk filled"))
        sizes = [os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p)]
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (max(sizes) + 60_000, resource.RLIM_INFINITY))
        out = []
        for i in range(40):
            try:
                archive.append_message(Session(id="s"), Message("user", f"turn {i} " + "x" * 900))
                out.append(None)
            except ArchiveWriteError as exc:
                out.append(str(exc))
        print(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    failed = [r for r in results if r is not None]
    assert len(failed) >= 30, results  # the limit bit early
    assert all("kept in" in r and "state.db.spool.jsonl" in r for r in failed)
    with SessionArchive(path) as archive:  # no limit now: the open stores the spool
        stored = contents(archive, "s")
        assert not archive.spool.has_pending()
    assert stored[0] == "before the disk filled"
    assert [s.split(" ", 2)[1] for s in stored[1:]] == [str(i) for i in range(40)]


def test_a_crash_after_storing_the_spool_never_stores_it_twice(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as archive:
        archive.spool.append(spool_record(Session(id="s", title="Spooled"),
                                          ("user", "one", None, None, None, 1.0, None)))
        archive.spool.append(spool_record("s", ("user", "two", None, None, None, 2.0, None)))
        # The replay committed, then the process died before emptying the spool:
        assert archive._store_spooled(archive.spool.pending()) == 2
        assert archive.spool.has_pending()
        assert archive.replay_spool() == 0  # the ids are recorded: nothing stored again
        assert contents(archive, "s") == ["one", "two"]
        assert archive.get_session("s").title == "Spooled"
        assert not archive.spool.has_pending()


def test_the_provider_raises_on_a_failed_write_and_keeps_the_message(hermes_home: Path) -> None:
    provider = make_instance(SessionArchiveProvider, "memory-provider", hermes_home,
                             config="session_archive:\n  busy_timeout: 0.2\n")
    session = Session(id="turns")
    provider.on_message(Message("user", "first"), session)
    holder = sqlite3.connect(provider.archive.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process keeps the write lock
    try:
        with pytest.raises(ArchiveWriteError, match="kept in"):
            provider.on_message(Message("assistant", "second"), session)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    provider.on_message(Message("user", "third"), session)
    assert contents(provider.archive, "turns") == ["first", "second", "third"]
    provider.shutdown()


def test_config_model_is_unchanged_by_the_spool() -> None:
    # The spool needs no setting: it sits beside the archive file.
    assert "spool" not in SessionArchiveConfig.model_fields


def test_writers_queue_on_the_write_gate(tmp_path: Path) -> None:
    """Issue 17 item 12: writers of one file wait in the kernel on ``state.db.lock`` (woken when it
    is released) instead of polling SQLite's lock; a holder past busy_timeout is an error."""
    import fcntl
    import threading

    path = tmp_path / "state.db"
    archive = SessionArchive(path, busy_timeout=0.5)
    archive.append_message("s", Message("user", "first"))
    patient = SessionArchive(path, busy_timeout=60)  # a writer willing to wait
    gate = path.with_name("state.db.lock")
    assert gate.exists() and (gate.stat().st_mode & 0o777) == 0o600
    other = os.open(gate, os.O_RDWR)  # another writer (its own open file) holds the gate
    fcntl.flock(other, fcntl.LOCK_EX)
    with pytest.raises(ArchiveWriteError, match=r"locked by another process.*kept in"):
        archive.append_message("s", Message("user", "second"))
    done = threading.Event()

    def append() -> None:
        patient.append_message("s", Message("user", "third"))
        done.set()

    waiter = threading.Thread(target=append)
    waiter.start()
    assert not done.wait(0.1)  # queued behind the holder, not writing past it
    fcntl.flock(other, fcntl.LOCK_UN)
    os.close(other)
    waiter.join(timeout=30)
    assert done.is_set()
    assert contents(patient, "s") == ["first", "second", "third"]  # the spool went first
    patient.close()
    archive.close()


def test_a_large_damaged_file_is_checked_in_the_background_and_refuses_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files above SYNC_CHECK_BYTES are checked off the open path (about 5 ms per MB); damage it
    finds makes every later append fail clearly, the message kept in the spool."""
    import time

    from hermes_core.plugins.memory.session_archive import db as db_module

    path = tmp_path / "state.db"
    with SessionArchive(path) as a:
        for i in range(400):
            a.append_message("s", Message("user", f"message {i} about the quarterly report " * 8))
    data = bytearray(path.read_bytes())
    middle = len(data) // PAGE // 2
    data[middle * PAGE : (middle + 1) * PAGE] = os.urandom(PAGE)
    path.write_bytes(bytes(data))
    monkeypatch.setattr(db_module, "SYNC_CHECK_BYTES", 0)  # treat this file as a large one
    archive = SessionArchive(path)  # opens at once
    deadline = time.monotonic() + 60
    while archive.db._damage is None:  # the background check's own result
        assert time.monotonic() < deadline, "the background check never finished"
        time.sleep(0.01)
    with pytest.raises(ArchiveWriteError, match=r"integrity check failed.*kept in"):
        archive.append_message("s", Message("user", "after the check"))
    assert [e.record["row"][1] for e in archive.spool.pending()] == ["after the check"]
    archive.close()


def test_nan_and_infinities_in_a_message_are_stored_as_text_and_block_nothing(
        tmp_path: Path, storage_url: str | None) -> None:
    """Before: the row failed the archive's JSON check; spooled, it then failed every later
    append too (the spool replays in order), so the archive stored nothing more."""
    from archive_support import make_archive

    archive = make_archive(tmp_path, storage_url)
    try:
        odd = {"x": float("nan"), "y": [float("inf"), -float("inf")], 1.5: "kept"}
        archive.append_message(Session(id="s", attributes={"score": float("nan")}),
                               Message("user", "before"))
        archive.append_message("s", Message("assistant", "", tool_calls=[
            ToolCall("t1", "calc", odd)], meta={"w": float("-inf")}))
        archive.append_message("s", Message("assistant", "after"))
        stored = archive.messages("s")
        assert not archive.spool.has_pending()
        assert [m.content for m in stored] == ["before", "", "after"]
        assert stored[1].tool_calls[0]["arguments"] == {
            "x": "NaN", "y": ["Infinity", "-Infinity"], "1.5": "kept"}
        assert archive.get_session("s").attributes["score"] == "NaN"
    finally:
        archive.close()


def test_a_spool_holding_bare_nan_from_an_earlier_release_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionArchive(path) as archive:
        archive.spool.append(spool_record("s", (
            "assistant", "", None, None, '[{"id":"t1","name":"calc","arguments":{"x":NaN}}]',
            1.0, '{"w":-Infinity}')))
        assert archive.replay_spool() == 1
        archive.append_message("s", Message("user", "after"))
        stored = archive.messages("s")
    assert [m.content for m in stored] == ["", "after"]
    assert stored[0].tool_calls[0]["arguments"] == {"x": "NaN"}


def test_forget_scrubs_spooled_messages_so_a_replay_brings_nothing_back(tmp_path: Path) -> None:
    from hermes_core.plugins.memory.session_archive.forget import forget_messages

    archive = SessionArchive(tmp_path / "state.db")
    alice = Session(id="s-alice", title="About LISBON", attributes={"user_id": "alice"})
    bob = Session(id="s-bob", attributes={"user_id": "bob"})
    archive.append_message(alice, Message("user", "turn before"))
    con = archive.db.con
    con.execute(f"PRAGMA max_page_count = {con.execute('PRAGMA page_count').fetchone()[0]}")
    for i in range(100):  # fill the free pages: the database is full
        try:
            archive.append_message(Session(id="filler"), Message("user", f"filler {i} " + "f" * 3000))
        except ArchiveWriteError:
            break
    waiting = len(archive.spool.pending())
    assert waiting == 1
    spooled = [(alice, "I moved to  Lisbon " + "x" * 3000), (alice, "three beehives " + "y" * 3000),
               (bob, "Lisbon for bob " + "z" * 3000), ("s-alice", "lisbon again " + "w" * 3000)]
    for session, text in spooled:
        with pytest.raises(ArchiveWriteError):
            archive.append_message(session, Message("user", text))
    assert len(archive.spool.pending()) == waiting + 4
    con.execute("PRAGMA max_page_count = 1073741823")  # space again; the spool is not replayed yet

    dry = forget_messages(archive, "LISBON", scope="user:alice", dry_run=True)
    assert [sid for sid, _role, _text in dry.pending] == ["s-alice", "s-alice"]
    assert len(archive.spool.pending()) == waiting + 4  # a preview changes nothing
    done = forget_messages(archive, "LISBON", scope="user:alice")
    assert len(done.pending) == 2 and done.deleted == done.matched
    archive.replay_spool()
    assert [c.split(" ")[0] for c in contents(archive, "s-alice")] == ["turn", "three"]
    assert [c.split(" ")[0] for c in contents(archive, "s-bob")] == ["Lisbon"]  # not alice's
    assert "lisbon" not in json.dumps([r.record for r in archive.spool.pending()]).casefold()
    archive.close()


def test_forget_scrubs_the_refused_and_unreadable_spool_files_too(tmp_path: Path) -> None:
    """Records the archive refused (``state.db.spool.rejected.jsonl``) and lines nobody could
    read (``.unreadable``) are never stored again, but they held the forgotten subject's text on
    disk after forget, and the dry run did not count them."""
    from hermes_core.plugins.memory.session_archive.forget import forget_messages

    archive = SessionArchive(tmp_path / "state.db")
    archive.append_message("s", Message("user", "hello"))
    rejected = tmp_path / "state.db.spool.rejected.jsonl"
    unreadable = tmp_path / "state.db.spool.jsonl.unreadable"
    rejected.write_text(
        json.dumps({**spool_record("s", ("user", "I moved to  LISBON in May", None, None, None, 1.0,
                                         None)), "rejected": "NOT NULL", "rejected_at": 1.0})
        + "\n" + json.dumps({**spool_record("s", ("user", "bees", None, None, None, 2.0, None)),
                             "rejected": "NOT NULL", "rejected_at": 2.0}) + "\n")
    unreadable.write_text('{"v": 1, "row": ["user", "Lisbon\\n in\n'
                          '{"v": 1, "row": ["user", "nothing to see\n')

    dry = forget_messages(archive, "lisbon  IN", dry_run=True)  # split by an escaped line break
    assert len(dry.aside) == 2 and dry.matched == 2
    assert "lisbon" in rejected.read_text().casefold()  # a preview changes nothing

    done = forget_messages(archive, "lisbon in")
    assert done.deleted == 2
    assert "lisbon" not in rejected.read_text().casefold() and "bees" in rejected.read_text()
    assert unreadable.read_text() == '{"v": 1, "row": ["user", "nothing to see\n'
    archive.close()


def test_a_spooled_row_the_database_refuses_is_set_aside_and_the_rest_are_stored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Before: one row failing a constraint failed every replay, and since each append replays
    the spool first, the archive stored nothing more, ever."""
    path = tmp_path / "state.db"
    with SessionArchive(path) as archive:
        archive.append_message("s", Message("user", "stored"))
        archive.spool.append(spool_record("s", ("user", "one", None, None, None, 1.0, None)))
        archive.spool.append(spool_record("s", ("user", None, None, None, None, 2.0, None)))
        archive.spool.append(spool_record("s", ("user", "three", None, None, "{not json", 3.0,
                                                None)))
        archive.spool.append({"v": 1, "id": "broken", "row": ["user", "x"]})  # no session
        archive.spool.append(spool_record("s", ("user", "five", None, None, None, 5.0, None)))
        with caplog.at_level("ERROR"):
            assert archive.replay_spool() == 2
        assert contents(archive, "s") == ["stored", "one", "five"]
        archive.append_message("s", Message("user", "after"))
        assert contents(archive, "s")[-1] == "after"
        assert not archive.spool.has_pending()
        aside = tmp_path / "state.db.spool.rejected.jsonl"
        kept = [json.loads(line) for line in aside.read_text().splitlines()]
        assert [r["row"][1] for r in kept] == [None, "three", "x"]
        assert all(r["rejected"] for r in kept)
        assert str(aside) in caplog.text and "NOT NULL" in caplog.text
