"""``hermes-core import hermes`` on a home written by the real hermes-agent 0.19.0.

hermes-agent is installed in the test environment (tox env ``hermes-agent``); a subprocess with
``HERMES_HOME`` pointing at a temporary folder drives its own ``SessionDB`` and memory tool to
write sessions with a compaction lineage (a chain of three, a branch, an in-place compaction with
an undone turn) and both memory files. The import then runs through the real command line into a
real SQLite archive and, in the second test, a real throwaway PostgreSQL database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

try:  # the real distribution, not a stand-in for its module names
    metadata.version("hermes-agent")
except metadata.PackageNotFoundError:
    pytest.skip("needs hermes-agent==0.19.0 (tox -e hermes-agent)", allow_module_level=True)

from hermes_core.cli import cli

#: run by the real hermes-agent in a subprocess with HERMES_HOME set; prints what it wrote
BUILD_HOME = r'''
import json, sys, time
from pathlib import Path
from hermes_state import SessionDB
from tools.memory_tool import MemoryStore, memory_tool

home = Path(sys.argv[1])
db = SessionDB(db_path=home / "state.db")
written = []
t = 1_700_000_000.0

def say(sid, role, text, **kw):
    global t
    t += 1
    db.append_message(sid, role, text, timestamp=t, **kw)
    written.append({"session": sid, "role": role, "text": text})

db.create_session("hx-root", "cli", model="claude-x")
say("hx-root", "user", "plan the zqalpha migration")
say("hx-root", "assistant", "checking the zqbravo schema",
    tool_calls=[{"id": "call-1", "type": "function",
                 "function": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"}}])
say("hx-root", "tool", "zqcharlie.sql listed", tool_call_id="call-1", tool_name="terminal")
db.end_session("hx-root", "compression")
db.create_session("hx-mid", "cli", parent_session_id="hx-root")
say("hx-mid", "user", "continue with zqdelta")
say("hx-mid", "assistant", "zqecho done")
db.end_session("hx-mid", "compression")
db.create_session("hx-tip", "cli", parent_session_id="hx-mid")
say("hx-tip", "user", "finish zqfoxtrot")
say("hx-tip", "assistant", "zqgolf finished")
db.create_session("hx-branch", "cli", parent_session_id="hx-tip",
                  model_config={"_branched_from": "hx-tip"})
say("hx-branch", "user", "try zqhotel instead")
db.create_session("hx-inplace", "telegram", user_id="u-42")
say("hx-inplace", "user", "remember zqindia please")
say("hx-inplace", "assistant", "zqjuliet noted")
db.archive_and_compact("hx-inplace", [{"role": "user", "content": "summary: zqkilo"}])
written.append({"session": "hx-inplace", "role": "user", "text": "summary: zqkilo"})
undone = db.append_message("hx-inplace", "user", "zqlima was a typo", timestamp=t + 50)
db.rewind_to_message("hx-inplace", undone)
db.close()

store = MemoryStore()
store.load_from_disk()
for target, text in [("memory", "The project uses PostgreSQL 15"),
                     ("memory", "Deploys go out on Tuesdays\nafter the freeze"),
                     ("user", "Prefers short answers"),
                     ("user", "Works in Lisbon")]:
    out = json.loads(memory_tool(action="add", target=target, content=text, store=store))
    assert out.get("success"), out
skill = home / "skills" / "devops" / "rotate-keys"
skill.mkdir(parents=True)
(skill / "SKILL.md").write_text("---\nname: rotate-keys\ndescription: Rotate the API keys "
                                "safely\n---\n\n1. Create the new key.\n2. Revoke the old one.\n")
(skill / "references").mkdir()
(skill / "references" / "notes.md").write_text("see the runbook")
print(json.dumps(written))
'''


def build_hermes_home(home: Path) -> list[dict[str, str]]:
    """A Hermes home written by hermes-agent itself; the messages it wrote."""
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HERMES_HOME": str(home)}
    done = subprocess.run([sys.executable, "-c", BUILD_HOME, str(home)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    written: list[dict[str, str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return written


def run(home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli, list(args), env={"HERMES_CORE_HOME": str(home),
                                                      **(env or {})},
                                catch_exceptions=False)
    return result


def json_of(result: Any) -> Any:
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def hermes_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, str]]]:
    home = tmp_path_factory.mktemp("hermes") / ".hermes"
    return home, build_hermes_home(home)


def _search_all(core: Path, written: list[dict[str, str]], env: dict[str, str] | None = None
                ) -> None:
    for message in written:
        token = next(w for w in message["text"].replace(".", " ").split() if w.startswith("zq"))
        found = run(core, "sessions", "search", token, "--json", env=env)
        assert found.exit_code == 0, found.output
        hits = json_of(found)["hits"]
        assert message["session"] in {h["session_id"] for h in hits}, (token, hits)


def _check_import(core: Path, hermes: Path, written: list[dict[str, str]],
                  env: dict[str, str] | None = None) -> None:
    first = run(core, "import", "hermes", str(hermes), "--json", env=env)
    assert first.exit_code == 0, first.output
    report = json_of(first)
    assert report["sessions"]["imported"] == {"sessions": 5, "messages": len(written)}
    assert report["sessions"]["left"] == {"messages rewound (undone) in Hermes": 1}
    assert report["skills"]["created"] == ["rotate-keys"]
    assert "supporting file" in report["skills"]["notes"][0]

    _search_all(core, written, env)
    gone = run(core, "sessions", "search", "zqlima", "--json", env=env)
    assert "hx-inplace" not in gone.stdout  # the undone turn stays undone

    tip = json_of(run(core, "sessions", "show", "hx-tip", "--json", env=env))["session"]
    assert (tip["parent_session_id"], tip["origin"], tip["chain_root"]) == (
        "hx-mid", "compression", "hx-root")
    export = run(core, "sessions", "export", "hx-tip", "--chain", env=env)
    lines = [json.loads(line) for line in export.stdout.splitlines()]
    assert [x["id"] for x in lines if x["type"] == "session"] == ["hx-root", "hx-mid", "hx-tip"]
    call = next(x for x in lines if x["type"] == "message" and x["tool_calls"])
    assert call["tool_calls"] == [{"id": "call-1", "name": "terminal",
                                   "arguments": {"command": "ls"}}]
    branch = json_of(run(core, "sessions", "show", "hx-branch", "--json", env=env))["session"]
    assert (branch["origin"], branch["parent_session_id"]) == ("branch", "hx-tip")

    # the memory entries, equal to Hermes' files, in one version of origin import each
    for name, target in (("MEMORY.md", "memory"), ("USER.md", "user")):
        theirs = [e.strip() for e in (hermes / "memories" / name).read_text().split("\n§\n")]
        shown_mem = json_of(run(core, "memory", "show", "--json", env=env))
        assert shown_mem[target]["entries"] == theirs
    versions = json_of(run(core, "memory", "history", "--json", env=env))
    assert [(v["origin"], v["targets"]) for v in versions] == [("import", ["memory"]),
                                                               ("import", ["user"])]

    again = run(core, "import", "hermes", str(hermes), "--json", env=env)
    assert again.exit_code == 0, again.output
    second = json_of(again)
    assert second["sessions"]["imported"] == {"sessions": 0, "messages": 0}
    assert second["sessions"]["already_there"] == {"sessions": 5}
    assert [m["added"] for m in second["memory"]] == [0, 0]
    assert second["skills"]["created"] == [] and second["skills"]["already_there"] == [
        "rotate-keys"]
    assert len(json_of(run(core, "memory", "history", "--json", env=env))) == 2


def _contents(home: Path) -> dict[Path, bytes]:
    """Every file of a home (SQLite's -wal/-shm sidecars aside: a reader may create them)."""
    return {p: p.read_bytes() for p in home.rglob("*")
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_import_hermes_home_sqlite(hermes_home: tuple[Path, list[dict[str, str]]],
                                   tmp_path: Path) -> None:
    hermes, written = hermes_home
    before = _contents(hermes)
    _check_import(tmp_path / "core", hermes, written)
    assert _contents(hermes) == before  # Hermes' home is only read


def test_import_hermes_dry_run_writes_nothing(hermes_home: tuple[Path, list[dict[str, str]]],
                                              tmp_path: Path) -> None:
    hermes, written = hermes_home
    core = tmp_path / "core"
    result = run(core, "import", "hermes", str(hermes), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json_of(result)
    assert report["sessions"]["imported"] == {"sessions": 5, "messages": len(written)}
    assert [m["added"] for m in report["memory"]] == [2, 2]
    assert not (core / "state.db").exists() and not (core / "memories" / "MEMORY.md").exists()


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """A fresh database on a real throwaway PostgreSQL server (hermes_core.testing.postgres);
    skipped without server binaries unless HERMES_CORE_TEST_PG_REQUIRED=1."""
    from hermes_core.testing.postgres import PG_REQUIRED_ENV, PostgresUnavailable, temp_postgres

    try:
        manager = temp_postgres()
        server = manager.__enter__()
    except PostgresUnavailable as exc:
        if os.environ.get(PG_REQUIRED_ENV) == "1":
            pytest.fail(f"{PG_REQUIRED_ENV}=1 but no PostgreSQL server could be started: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield server.create_database("hermes_import")
    finally:
        from hermes_core.storage import close_pools

        close_pools()
        manager.__exit__(None, None, None)


def test_import_hermes_home_postgresql(hermes_home: tuple[Path, list[dict[str, str]]],
                                       tmp_path: Path, pg_database: str) -> None:
    hermes, written = hermes_home
    env = {"HERMES_CORE_STORAGE_URL": pg_database}
    _check_import(tmp_path / "core", hermes, written, env=env)
    assert not (tmp_path / "core" / "state.db").exists()  # the sessions went to the database
