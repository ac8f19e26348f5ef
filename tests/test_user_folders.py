"""Per-user memory folders are case-distinct: "Alice" and "alice" never share one, on any OS.

No case-insensitive file system can be mounted here, so the collision is tested as the property
that decides it: no two distinct keys get folder names equal under ``casefold()`` (what macOS'
default APFS and Windows' NTFS compare). The rename of a folder under its old name, and the
refusal when both names exist, run on real folders; the owners that ``storage migrate`` lists and
copies run against the real CLI and a throwaway PostgreSQL.
"""

from __future__ import annotations

import json
import os
import random
import string
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.file_memory import FileMemoryConfig
from hermes_core.plugins.memory.file_memory.backend import memory_dir, open_store
from hermes_core.plugins.memory.file_memory.doctor import user_folder_checks
from hermes_core.plugins.memory.file_memory.intent import intent_path, record
from hermes_core.plugins.memory.file_memory.pins import pin, read_pins
from hermes_core.plugins.memory.file_memory.store import MemoryStore
from hermes_core.plugins.memory.file_memory.transfer import owners_of
from hermes_core.plugins.memory.file_memory.user_folders import UserFolderConflict
from hermes_core.users import (
    UserKeyError,
    legacy_user_folder,
    user_folder_name,
    user_key_of_folder,
)

FIRST = string.ascii_letters + string.digits + "_@"
REST = FIRST + ".-"


def _keys(count: int, seed: int) -> list[str]:
    """Random valid keys, with many that differ only in case (the same word, cased at random)."""
    rng = random.Random(seed)
    keys: set[str] = {"alice", "Alice", "ALICE", "aLiCe", "a", "A", "_", "@", "x.y", "X.Y",
                      "bob@example.com", "Bob@Example.COM", "z" * 64, "Z" * 64}
    while len(keys) < count:
        word = rng.choice(FIRST) + "".join(rng.choice(REST) for _ in range(rng.randint(0, 12)))
        keys.add(word)
        keys.add("".join(c.upper() if rng.random() < 0.5 else c.lower() for c in word))
    return sorted(keys)


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (lock files aside: they are empty and made on demand)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def test_no_two_keys_get_folders_equal_ignoring_case(tmp_path: Path) -> None:
    keys = _keys(5000, seed=11)
    folders = {key: memory_dir(tmp_path, key) for key in keys}
    assert all(f.parent == tmp_path / "memories" / "users" for f in folders.values())
    by_casefold: dict[str, str] = {}
    for key, folder in folders.items():
        other = by_casefold.setdefault(folder.name.casefold(), key)
        assert other == key, f"{other!r} and {key!r} share the folder {folder.name!r} ignoring case"
    assert len(by_casefold) == len(keys)


def test_the_folder_name_maps_back_to_its_key() -> None:
    for key in _keys(3000, seed=12):
        name = user_folder_name(key)
        assert name == name.lower() and len(name) <= 2 * len(key)
        assert user_key_of_folder(name) == key
    assert user_folder_name("Alice") == "^alice"
    assert user_folder_name("bob.smith@x") == "bob.smith@x"  # lowercase keys: unchanged
    for stray in ["^", "a^", "^A", "^1", "^^a", "Alice", ".hidden", "-x", "", "a b", "^.a"]:
        assert user_key_of_folder(stray) is None, stray
    assert legacy_user_folder("Alice") == "Alice"
    assert legacy_user_folder("alice") is None and legacy_user_folder("^alice") is None
    with pytest.raises(UserKeyError):
        user_folder_name("al^ce")


def _old_home(home: Path, key: str) -> MemoryStore:
    """A user's memory as the previous release left it: in ``users/<key>/``, with two
    versions, a pin, and a write cut short after its version was recorded (an intent)."""
    old = MemoryStore(home / "memories" / "users" / key)
    old.add("memory", f"{key} runs the night shift")
    halfway = old.path("memory").read_bytes()
    old.add("memory", f"{key} prefers tickets in English")
    old.add("user", f"{key} likes oolong")
    pin(old, "user", "oolong")
    complete = old.path("memory").read_bytes()
    # the writer of the "prefers tickets" version died before replacing MEMORY.md
    version = max(v.version for v in old.history.read() if "memory" in v.stores)
    record(old.path("memory"), "memory", version, halfway, complete)
    old.path("memory").write_bytes(halfway)
    return old


def test_a_folder_under_its_old_name_moves_with_everything_in_it(tmp_path: Path) -> None:
    old = _old_home(tmp_path, "Alice")
    before = _tree(old.directory)
    versions = [v.to_dict() for v in old.history.read()]
    assert intent_path(old.path("memory")).name in {p.split("/")[-1] for p in before}
    store = open_store(FileMemoryConfig(), tmp_path, None, user="Alice")
    users = tmp_path / "memories" / "users"
    assert store.directory == users / "^alice"
    assert not old.directory.exists()
    # the intent moved too, and the store completed the cut-short write in its new place
    assert store.entries("memory") == ["Alice runs the night shift",
                                       "Alice prefers tickets in English"]
    assert not intent_path(store.path("memory")).exists()
    assert store.entries("user") == ["Alice likes oolong"]
    assert [v.to_dict() for v in store.history.read()] == versions
    assert read_pins(store)["user"] == ["Alice likes oolong"]
    after = _tree(store.directory)
    assert {k: v for k, v in before.items() if "intent" not in k and k != "MEMORY.md"} == {
        k: v for k, v in after.items() if k != "MEMORY.md"}
    # opened again: nothing more to do; "alice" (another user) gets a folder of its own
    assert open_store(FileMemoryConfig(), tmp_path, None, user="Alice").directory == store.directory
    alice = open_store(FileMemoryConfig(), tmp_path, None, user="alice")
    assert alice.directory == users / "alice" and alice.entries("user") == []


def _ignoring_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """Path.exists as a file system that ignores case answers it (macOS, Windows)."""
    def exists(self: Path) -> bool:
        try:
            return self.name.casefold() in {n.casefold() for n in os.listdir(self.parent)}
        except FileNotFoundError:
            return False

    monkeypatch.setattr(Path, "exists", exists)


def test_a_lowercase_key_settles_an_old_folder_equal_to_it_ignoring_case(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where case is ignored, "users/alice" would open Alice's old folder: it moves first.
    _old_home(tmp_path, "Alice")
    users = tmp_path / "memories" / "users"
    _ignoring_case(monkeypatch)
    assert memory_dir(tmp_path, "alice") == users / "alice"
    assert sorted(os.listdir(users)) == [".rename.lock", "^alice"]
    assert MemoryStore(users / "^alice").entries("user") == ["Alice likes oolong"]


def test_where_case_counts_a_lowercase_key_leaves_other_spellings_alone(tmp_path: Path) -> None:
    _old_home(tmp_path, "Alice")
    users = tmp_path / "memories" / "users"
    assert memory_dir(tmp_path, "alice") == users / "alice"
    assert sorted(os.listdir(users)) == ["Alice"]  # another user's folder, moved when it opens
    assert memory_dir(tmp_path, "Alice") == users / "^alice"
    assert sorted(os.listdir(users)) == [".rename.lock", "^alice"]


def test_opening_a_user_does_not_list_the_users_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A node with many thousand users opens each one's memory with a stat or two."""
    from hermes_core.plugins.memory.file_memory import user_folders

    MemoryStore(tmp_path / "memories" / "users" / "bob").add("user", "bob cycles")
    MemoryStore(tmp_path / "memories" / "users" / "^carol").add("user", "Carol rows")

    def no_listing(path: object) -> list[str]:
        raise AssertionError(f"listed {path}")

    monkeypatch.setattr(user_folders.os, "listdir", no_listing)
    for key in ("bob", "Carol", "dave", "Eve"):
        open_store(FileMemoryConfig(), tmp_path, None, user=key)


def test_lowercase_keys_keep_their_folder_and_take_no_lock(tmp_path: Path) -> None:
    MemoryStore(tmp_path / "memories" / "users" / "bob").add("user", "bob cycles")
    store = open_store(FileMemoryConfig(), tmp_path, None, user="bob")
    assert store.entries("user") == ["bob cycles"]
    assert sorted(os.listdir(tmp_path / "memories" / "users")) == ["bob"]


def test_both_names_present_is_refused_and_nothing_is_touched(tmp_path: Path) -> None:
    old = _old_home(tmp_path, "Alice")
    new = MemoryStore(tmp_path / "memories" / "users" / "^alice")
    new.add("user", "Alice drinks coffee now")
    users = tmp_path / "memories" / "users"
    trees = {name: _tree(users / name) for name in ("Alice", "^alice")}
    with pytest.raises(UserFolderConflict) as caught:
        open_store(FileMemoryConfig(), tmp_path, None, user="Alice")
    message = str(caught.value)
    assert str(old.directory) in message and str(new.directory) in message
    assert "Nothing was changed" in message and "mv " in message
    assert {name: _tree(users / name) for name in ("Alice", "^alice")} == trees
    listed = CliRunner().invoke(cli, ["memory", "users", "--json"], env={
        "HERMES_CORE_HOME": str(tmp_path), "HERMES_CORE_STORAGE_URL": ""})
    assert json.loads(listed.output) == [{"user": "Alice", "where": str(new.directory),
                                          "old_name": False, "both_names": True}]
    checks = user_folder_checks(tmp_path / "memories")
    assert [c.ok for c in checks] == [False] and str(old.directory) in checks[0].detail
    # the CLI says so without a traceback, and exits non-zero
    env = {"HERMES_CORE_HOME": str(tmp_path), "HERMES_CORE_STORAGE_URL": ""}
    result = CliRunner().invoke(cli, ["memory", "show", "--user", "Alice"], env=env)
    assert result.exit_code != 0 and str(new.directory) in result.output
    assert "Traceback" not in result.output
    assert {name: _tree(users / name) for name in ("Alice", "^alice")} == trees


def test_doctor_reports_an_old_folder_name_and_renames_nothing(tmp_path: Path) -> None:
    old = _old_home(tmp_path, "Alice")
    MemoryStore(tmp_path / "memories" / "users" / "bob").add("user", "bob cycles")
    checks = user_folder_checks(tmp_path / "memories")
    assert [(c.ok, c.warning) for c in checks] == [(True, True)]
    assert str(old.directory) in checks[0].detail and "^alice" in checks[0].detail
    assert old.directory.is_dir()
    memory_dir(tmp_path, "Alice")
    assert [(c.ok, c.warning) for c in user_folder_checks(tmp_path / "memories")] == [
        (True, False)]


def _run(home: Path, *args: str, url: str = "") -> str:
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_migrate_lists_owners_by_their_real_keys(tmp_path: Path, pg_url: str) -> None:
    home, back = tmp_path / "home", tmp_path / "back"
    home.mkdir()
    back.mkdir()
    _old_home(home, "Bob")  # not renamed yet
    for key, text in [("Alice", "Alice is the admin"), ("alice", "alice is a guest")]:
        open_store(FileMemoryConfig(), home, None, user=key).add("user", text)
    assert owners_of(home / "memories") == ["", "Alice", "Bob", "alice"]
    listed = json.loads(_run(home, "memory", "users", "--json"))  # only read: nothing renamed
    users = home / "memories" / "users"
    assert listed == [
        {"user": "Alice", "where": str(users / "^alice"), "old_name": False, "both_names": False},
        {"user": "Bob", "where": str(users / "Bob"), "old_name": True, "both_names": False},
        {"user": "alice", "where": str(users / "alice"), "old_name": False, "both_names": False}]
    assert (users / "Bob").is_dir()
    report = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    assert report["errors"] == []
    assert sorted(report["plugins"]["file_memory"]["detail"]["copied"]) == [
        "Alice/user", "Bob/memory", "Bob/user", "alice/user"]
    in_db = json.loads(_run(home, "memory", "users", "--json", url=pg_url))
    assert [row["user"] for row in in_db] == ["Alice", "Bob", "alice"]
    for key, text in [("Alice", "Alice is the admin"), ("alice", "alice is a guest"),
                      ("Bob", "Bob likes oolong")]:
        shown = json.loads(_run(home, "memory", "show", "--json", "--user", key, url=pg_url))
        assert shown["user"]["entries"] == [text], key
    # and back from the database into another home's files: each owner in its own folder
    returned = json.loads(_run(back, "storage", "migrate", "--from", pg_url, "--json"))
    assert returned["errors"] == []
    users = back / "memories" / "users"
    assert sorted(os.listdir(users)) == ["^alice", "^bob", "alice"]
    assert owners_of(back / "memories") == ["", "Alice", "Bob", "alice"]
    assert MemoryStore(users / "^alice").entries("user") == ["Alice is the admin"]
    assert MemoryStore(users / "alice").entries("user") == ["alice is a guest"]
    assert MemoryStore(users / "^bob").entries("memory") == [
        "Bob runs the night shift", "Bob prefers tickets in English"]
