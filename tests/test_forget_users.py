"""``forget`` reaches every user's curated memory (``memory.scope: user``), not only the shared one.

Real files, the real CLI and a real host; with ``storage.url`` the same on a throwaway PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.file_memory import FileMemoryConfig, MemoryStore
from hermes_core.plugins.memory.file_memory.backend import open_store


def _invoke(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _mentions(home: Path, word: str) -> list[str]:
    """Every file of the memory folder (its history included) that still holds ``word``."""
    return sorted(str(p.relative_to(home)) for p in (home / "memories").rglob("*")
                  if p.is_file() and word.encode() in p.read_bytes())


def _seed(home: Path, url: str | None) -> None:
    open_store(FileMemoryConfig(), home, url).add("user", "Works from the Lisbon office")
    open_store(FileMemoryConfig(), home, url, user="Alice").add(
        "user", "Alice moved to Lisbon in May")
    open_store(FileMemoryConfig(), home, url, user="alice").add(
        "memory", "alice's team meets in lisbon on Mondays")
    open_store(FileMemoryConfig(), home, url, user="carol").add("user", "carol likes Porto")


@pytest.mark.parametrize("backend", ["files", "postgresql"])
def test_forget_deletes_from_every_users_memory(home: Path, backend: str,
                                                request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    storage = f"storage:\n  url: {url}\n" if url else ""
    # only the file memory: this test is about its owners (the archive has tests of its own)
    (home / "config.yaml").write_text("memory:\n  scope: user\n  providers: [file_memory]\n"
                                      + storage, encoding="utf-8")
    _seed(home, url)
    if url is None:
        # an old-named folder (an earlier release) is found and forgotten in too
        MemoryStore(home / "memories" / "users" / "Bob").add("memory", "Bob's Lisbon desk")
    plan = {r["provider"]: r for r in _invoke("forget", "Lisbon", "--dry-run", "--json")["plan"]}
    expected = 3 if url else 4
    assert plan["file_memory"]["matched"] == expected, plan["file_memory"]
    items = plan["file_memory"]["items"]
    assert any(i.startswith("USER.md:") for i in items)  # the shared memory, as before
    assert any(i.startswith("Alice/USER.md:") for i in items), items
    assert any(i.startswith("alice/MEMORY.md:") for i in items), items
    done = {r["provider"]: r for r in _invoke("forget", "Lisbon", "--json", "--yes")["result"]}
    assert done["file_memory"]["deleted"] == expected, done["file_memory"]
    for key in ["", "Alice", "alice", "carol"] + ([] if url else ["Bob"]):
        store = open_store(FileMemoryConfig(), home, url, user=key or None)
        assert not [e for t in ("memory", "user") for e in store.entries(t)
                    if "lisbon" in e.lower()], key
    assert open_store(FileMemoryConfig(), home, url, user="carol").entries("user") == [
        "carol likes Porto"]
    if url is None:
        assert _mentions(home, "Lisbon") == [] and _mentions(home, "lisbon") == []


def test_forget_for_one_user_deletes_from_that_users_memory_only(home: Path) -> None:
    from hermes_core.cli._common import load_host
    from hermes_core.cli.forget_cmd import _forget_hook

    (home / "config.yaml").write_text("memory:\n  scope: user\n", encoding="utf-8")
    _seed(home, None)
    host = load_host()
    host.activate_memory_providers()
    try:
        outcomes = _forget_hook(host, "Lisbon", "user:Alice", False)
        report = {o.plugin: o.value for o in outcomes}["memory-provider:file_memory"]
        assert (report.matched, report.deleted, report.cannot_delete) == (1, 1, None)
    finally:
        host.shutdown()
    assert open_store(FileMemoryConfig(), home, None, user="Alice").entries("user") == []
    assert open_store(FileMemoryConfig(), home, None, user="alice").entries("memory") == [
        "alice's team meets in lisbon on Mondays"]
    assert open_store(FileMemoryConfig(), home, None).entries("user") == [
        "Works from the Lisbon office"]
