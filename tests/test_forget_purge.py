"""After a forget, the forgotten text is not readable in any file of the home.

Deleting a row leaves its bytes behind unless SQLite is told otherwise: a free b-tree cell or
page keeps them (``PRAGMA secure_delete`` off, the default of most SQLite builds), an FTS5 index
keeps the term in its older segment next to the delete marker until the segments are merged,
and the ``-wal`` file keeps the pages written before the forget until it is checkpointed and
truncated. Real SQLite files, scanned byte by byte; the stores stay open during the scan, as a
server's do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_core.plugins.context_engine.lossless.store import SpanStore
from hermes_core.plugins.memory.session_archive import SessionArchive, search_messages
from hermes_core.plugins.memory.session_archive.forget import forget_messages
from hermes_core.types import Message, Session, ToolCall

SECRET = "zebraquokka991"
_connect = sqlite3.connect


def _insecure_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    """A connection as a build without SQLITE_SECURE_DELETE opens it (macOS, python.org,
    conda): freed cells and pages keep their bytes unless the store turns the pragma on."""
    con = _connect(*args, **kwargs)
    con.execute("PRAGMA secure_delete = 0")
    return con


@pytest.fixture(params=["build default", "secure_delete off by default"])
def build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param != "build default":
        monkeypatch.setattr(sqlite3, "connect", _insecure_connect)
    yield str(request.param)


def holding(home: Path) -> list[str]:
    """The files of the home whose bytes hold the secret (in any letter case)."""
    found = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        if SECRET.encode() in path.read_bytes().lower():
            found.append(path.name)
    return found


def filler(i: int) -> str:
    return f"message {i} about the deploy of service{i % 37} and the weather in town{i % 11}"


def test_forget_leaves_no_bytes_of_the_subject_in_the_home(tmp_path: Path, build: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    archive = SessionArchive(home / "state.db")
    spans = SpanStore(home / "context.db")
    try:
        for n in range(6):
            archive.append_messages(Session(id=f"s{n}"), [
                Message("user", filler(n * 100 + i)) for i in range(100)])
        archive.append_message(Session(id="s9"), Message(
            "user", f"my neighbour's wifi password is {SECRET}, keep it"))
        archive.append_message(Session(id="s9"), Message("assistant", "", tool_calls=[
            ToolCall("t1", "note", {"text": f"wifi: {SECRET.upper()}"})]))
        assert archive.count_messages() == 602
        for n in range(4):
            spans.add_span(f"c{n}", [Message("user", filler(i)) for i in range(150)], digest="d")
        spans.add_span("c9", [Message("user", f"the wifi password is {SECRET}")], digest="d")
        assert len(search_messages(archive, SECRET).hits) == 2
        assert set(holding(home)) >= {"state.db-wal", "context.db-wal"}

        done = forget_messages(archive, SECRET)
        assert done.deleted == 2
        hits, _digests = spans.forget(SECRET)
        assert len(hits) == 1

        # both stores still open (a server's would be): nothing in state.db, its -wal or -shm,
        # context.db or its -wal
        assert holding(home) == [], build
        # and what was kept is still there and found
        assert archive.count_messages() == 600
        assert len(search_messages(archive, "service5").hits) > 0
        assert len(spans.search("c1", "service5")) > 0
        assert search_messages(archive, SECRET).hits == [] and spans.search("c9", SECRET) == []
    finally:
        archive.close()
        spans.close()
    assert holding(home) == []
    for name, table in (("state.db", "messages_fts"), ("context.db", "span_fts")):
        con = _connect(home / name)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        con.close()


def test_the_stores_connections_delete_securely(tmp_path: Path, build: str) -> None:
    """Whatever the build's default, the stores holding forgettable text overwrite what they
    delete."""
    with SessionArchive(tmp_path / "state.db") as archive:
        assert archive.db.con.execute("PRAGMA secure_delete").fetchone()[0] == 1
    spans = SpanStore(tmp_path / "context.db")
    try:
        assert spans.db.con.execute("PRAGMA secure_delete").fetchone()[0] == 1
        vectors = spans.vector_storage()
        assert vectors.db.con.execute("PRAGMA secure_delete").fetchone()[0] == 1
        vectors.close()
    finally:
        spans.close()
