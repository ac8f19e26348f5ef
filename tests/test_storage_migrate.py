"""``storage migrate --to URL`` and sessions export/import between the backends, without loss."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.file_memory.store import MemoryStore
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.types import Message, Session, ToolCall, Usage


def _run(home: Path, *args: str, url: str | None = None) -> str:
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url or ""}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _fill(home: Path) -> list[str]:
    with SessionArchive(home / "state.db") as a:
        a.open_session(Session(id="s1", title="Printer", attributes={"user_id": "alice"}))
        a.append_messages("s1", [
            Message("user", "the printer shows E42 \x00 again 番茄"),
            Message("assistant", "", tool_calls=[ToolCall("t1", "terminal", {"cmd": "lpstat"})],
                    meta={"usage": {"input_tokens": 5}}),
            Message("tool", "idle", tool_name="terminal", tool_call_id="t1"),
        ])
        a.record_usage("s1", Usage(input_tokens=100, output_tokens=7), cost_usd=0.25)
        a.open_session(Session(id="s2", parent_session_id="s1"), origin="compression")
        a.append_message("s2", Message("user", "carried", meta={"carried_over": "s1"}))
        a.end_session("s2", "user_exit")
        a.open_session(Session(id="s3", title="Dinner"))
        a.append_message("s3", Message("user", "pasta"))
    shared = MemoryStore(home / "memories")
    shared.add("memory", "the build uses make")
    MemoryStore(home / "memories" / "users" / "alice").add("user", "alice likes oolong")
    return ["s1", "s2", "s3"]


def _export(home: Path, ids: list[str], url: str | None) -> list[dict]:
    out = home / f"export-{'pg' if url else 'sqlite'}.jsonl"
    _run(home, "sessions", "export", *ids, "-o", str(out), url=url)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_migrate_copies_sessions_and_memory_without_loss(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ids = _fill(home)
    report = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    assert (report["sessions_copied"], report["messages_copied"]) == (3, 5)
    assert sorted(report["memory_copied"]) == ["(shared)/memory", "alice/user"]
    assert "hermes-test" not in json.dumps(report)  # the password never printed
    assert _export(home, ids, pg_url) == _export(home, ids, None)  # lossless
    shown = json.loads(_run(home, "memory", "show", "--json", "--user", "alice", url=pg_url))
    assert shown["user"]["entries"] == ["alice likes oolong"]
    assert json.loads(_run(home, "memory", "show", "--json", url=pg_url))["memory"][
        "entries"] == ["the build uses make"]
    again = json.loads(_run(home, "storage", "migrate", "--to", pg_url, "--json"))
    assert (again["sessions_copied"], again["sessions_skipped"]) == (0, 3)
    assert again["memory_copied"] == []
    versions = json.loads(_run(home, "storage", "show", "--json", url=pg_url))
    assert versions["backend"] == "postgresql" and set(versions["schema"]) == {
        "session_archive", "file_memory"}


def test_sessions_exported_from_postgresql_import_into_sqlite_unchanged(
    tmp_path: Path, pg_url: str
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    ids = _fill(first)
    _run(first, "storage", "migrate", "--to", pg_url, "--json")
    from_pg = first / "from-pg.jsonl"
    _run(first, "sessions", "export", *ids, "-o", str(from_pg), url=pg_url)
    _run(second, "sessions", "import", str(from_pg), "--json")
    assert _export(second, ids, None) == _export(first, ids, None)
