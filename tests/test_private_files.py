"""Issue 17 item 5: every file hermes-core creates in its home is private (files 0600, folders 0700),
whatever the process umask. Real stores on real files: the session archive's state.db (with its
-wal/-shm), the lossless engine's context.db, the file memory through the CLI (MEMORY.md, USER.md,
lock files), skills, config.yaml written by ``config set``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.context_engine.lossless.store import SpanStore
from hermes_core.plugins.memory.session_archive.store import SessionArchive
from hermes_core.plugins.memory.skills import SkillLibrary
from hermes_core.private import private_dir, private_file, private_sqlite
from hermes_core.types import Message


@pytest.fixture
def loose_umask():
    old = os.umask(0o022)  # the usual default: without care, files come out 0644
    yield
    os.umask(old)


def modes(home: Path) -> dict[str, str]:
    found = {}
    for path in [home, *home.rglob("*")]:
        found[str(path.relative_to(home)) or "."] = oct(stat.S_IMODE(path.lstat().st_mode))
    return found


def test_everything_created_in_a_new_home_is_private(tmp_path, monkeypatch, loose_umask):
    home = tmp_path / "deep" / "home"  # the home and its parent are created by hermes-core
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    runner = CliRunner()
    assert runner.invoke(cli, ["config", "set", "memory.providers", "[file_memory]"]).exit_code == 0
    assert runner.invoke(cli, ["memory", "add", "prefers tea"]).exit_code == 0
    assert runner.invoke(cli, ["memory", "add", "--target", "user", "Name: Ana"]).exit_code == 0

    archive = SessionArchive(home / "state.db")
    archive.append_message("s1", Message("user", "hello"))
    assert (home / "state.db-wal").exists()  # checked while the archive is open
    spans = SpanStore(home / "context.db")
    spans.add_span("conv", [Message("user", "old turn")], "digest")
    SkillLibrary(home / "skills").create("deploy", "Deploy to staging", "1. make release")
    seen = modes(home)
    spans.close()
    archive.close()

    for name in ("state.db", "state.db-wal", "state.db-shm", "context.db", "config.yaml",
                 "memories/MEMORY.md", "memories/USER.md", "skills/deploy.md"):
        assert name in seen, (name, sorted(seen))
    assert any(name.endswith(".lock") for name in seen)
    loose = {name: mode for name, mode in seen.items()
             if mode != ("0o700" if (home / name).is_dir() or name == "." else "0o600")}
    assert loose == {}, loose
    assert oct(stat.S_IMODE((tmp_path / "deep").stat().st_mode)) == "0o700"  # created by us


def test_files_left_open_by_older_versions_are_tightened(tmp_path, loose_umask):
    db = tmp_path / "state.db"
    archive = SessionArchive(db)
    archive.append_message("s1", Message("user", "hello"))
    archive.close()
    for path in (db, tmp_path / "state.db-wal"):
        if path.exists():
            os.chmod(path, 0o644)
    private_sqlite(db)
    assert oct(stat.S_IMODE(db.stat().st_mode)) == "0o600"
    # a folder that existed before is not ours to change
    os.chmod(tmp_path, 0o755)
    private_dir(tmp_path / "new")
    assert oct(stat.S_IMODE(tmp_path.stat().st_mode)) == "0o755"
    assert oct(stat.S_IMODE((tmp_path / "new").stat().st_mode)) == "0o700"
    file = private_file(tmp_path / "new" / "f")
    assert oct(stat.S_IMODE(file.stat().st_mode)) == "0o600" and file.read_bytes() == b""


def test_a_folder_where_a_file_is_expected_keeps_its_permissions(tmp_path):
    """Before: a store pointed at a folder (``lossless.db_path: /tmp``, say) had that folder
    chmod'ed 0700: a shared folder such as /tmp was closed to every other user."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    for prepare in (private_file, private_sqlite):
        with pytest.raises(IsADirectoryError, match="is a folder, not a file"):
            prepare(shared)
        assert oct(stat.S_IMODE(shared.stat().st_mode)) == "0o1777"
    with pytest.raises(Exception, match="is a folder"):
        SpanStore(shared)
    assert oct(stat.S_IMODE(shared.stat().st_mode)) == "0o1777"
