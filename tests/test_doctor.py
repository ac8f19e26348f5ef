"""``hermes-core doctor`` checks what the config points at (issue 17 item 16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.records import spool_record
from hermes_core.types import Message


def checks() -> dict[str, dict[str, Any]]:
    from hermes_core.cli.doctor_cmd import run_checks

    return {c["name"]: c for c in run_checks()}


def test_doctor_checks_the_configured_archive_not_home_state_db(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "archives" / "work.db"
    elsewhere.parent.mkdir()
    with SessionArchive(elsewhere) as archive:
        archive.append_message("s", Message("user", "hello"))
    (home / "config.yaml").write_text(f"session_archive:\n  path: {elsewhere}\n", encoding="utf-8")
    found = checks()
    check = found["archive (work.db)"]
    assert check["ok"] and str(elsewhere) in check["detail"] and "1 sessions" in check["detail"]
    assert "state.db" not in found  # home/state.db is not what the config uses
    elsewhere.write_bytes(b"not a database at all " * 300)
    check = checks()["archive (work.db)"]
    assert not check["ok"] and str(elsewhere) in check["detail"]
    assert "left untouched" in check["detail"]


def test_doctor_reports_spooled_messages(home: Path) -> None:
    db = home / "state.db"
    with SessionArchive(db) as archive:
        archive.spool.append(spool_record("s", ("user", "waiting", None, None, None, 1.0, None)))
        # the archive is open: this entry waits until the next write or open
        check = checks()["state.db"]
    assert check["ok"] and check["warning"] and "1 message(s) wait" in check["detail"]


def test_doctor_checks_the_memory_files(home: Path) -> None:
    memories = home / "memories"
    memories.mkdir()
    (memories / "MEMORY.md").write_bytes("fact one\r\n§\r\nfact two\r\n".encode())
    (home / "config.yaml").write_text("file_memory:\n  user_char_limit: 20\n", encoding="utf-8")
    (memories / "USER.md").write_text("Name: Ana\n§\nPrefers tea over coffee\n", encoding="utf-8")
    found = checks()
    memory, user = found["MEMORY.md"], found["USER.md"]
    assert memory["ok"] and memory["warning"] and "2 entries" in memory["detail"]
    assert "CRLF" in memory["detail"]
    assert user["ok"] and user["warning"] and "over its limit" in user["detail"]
    (memories / "USER.md").write_bytes(b"\xff\xfe binary junk \x00")
    user = checks()["USER.md"]
    assert not user["ok"] and "not UTF-8" in user["detail"] and "left untouched" in user["detail"]



def test_doctor_advice_for_a_memories_file_moves_the_file(home: Path) -> None:
    (home / "memories").write_text("not a folder\n", encoding="utf-8")
    found = checks()
    for name in ("MEMORY.md", "USER.md"):
        check = found[name]
        assert not check["ok"], check
        # the advice must be one that works: memories/MEMORY.md cannot be moved, memories can
        assert f"mv {home / 'memories' / name}" not in check["detail"], check["detail"]
        assert f"mv {home / 'memories'} {home / 'memories'}." in check["detail"], check["detail"]
        assert "is a file, not a folder" in check["detail"]
    assert (home / "memories").read_text(encoding="utf-8") == "not a folder\n"


EMBEDDER = """
import math, os
from hermes_core import hookimpl
from hermes_core.kinds import Embedder

class Flaky(Embedder):
    name = "flaky"
    dimension = 3
    model_id = "flaky-v1"

    def embed(self, texts):
        if os.environ.get("FLAKY_NAN") == "1":
            return [[math.nan, 0.0, 1.0] for _ in texts]
        return [[0.0, 0.0, 1.0] for _ in texts]

@hookimpl
def register_embedders(register):
    register(Flaky)
"""


def test_doctor_says_whether_the_embedder_answers(home: Path, dir_plugin: Any,
                                                  monkeypatch: Any) -> None:
    """A configured embedder that is unknown, or answers NaN, fails doctor's embeddings check
    with the reason (it said nothing about semantic search); a working one passes."""
    dir_plugin("flaky", EMBEDDER)
    (home / "config.yaml").write_text("embeddings:\n  embedder: flaky\n", encoding="utf-8")
    check = checks()["embeddings"]
    assert check["ok"] and "flaky" in check["detail"] and "it answers" in check["detail"]
    monkeypatch.setenv("FLAKY_NAN", "1")
    check = checks()["embeddings"]
    assert not check["ok"] and "NaN" in check["detail"]
    assert "word search still works" in check["detail"]
    (home / "config.yaml").write_text("embeddings:\n  embedder: nosuch\n", encoding="utf-8")
    check = checks()["embeddings"]
    assert not check["ok"] and "unknown embedder 'nosuch'" in check["detail"]
    (home / "config.yaml").write_text("embeddings:\n  embedder: none\n", encoding="utf-8")
    check = checks()["embeddings"]
    assert check["ok"] and "embeddings.embedder: none" in check["detail"]


def test_doctor_does_not_check_unused_files_when_storage_is_a_database(
    home: Path, pg_url: str, monkeypatch: Any
) -> None:
    """With storage.url set, state.db and MEMORY.md/USER.md are not used: doctor says where the
    stores are (the URL's password hidden) instead of "not created yet"."""
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", pg_url)
    found = checks()
    password = pg_url.split("@")[0].rsplit(":", 1)[1]
    for name in ("state.db", "MEMORY.md", "USER.md"):
        detail = found[name]["detail"]
        assert found[name]["ok"] and "not created yet" not in detail, detail
        assert "not used" in detail and "@127.0.0.1" in detail and password not in detail
    assert found["activation"]["ok"], found["activation"]
