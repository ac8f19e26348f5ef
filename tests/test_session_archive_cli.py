"""``hermes-core sessions``: list, show, search, export, import, and a corrupt state.db."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import SessionArchive, schema
from hermes_core.types import Message, Session, ToolCall


@pytest.fixture
def run(home: Path):
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True):
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


@pytest.fixture
def filled(home: Path) -> Path:
    with SessionArchive(home / "state.db") as a:
        a.open_session(Session(id="s1", title="Printer trouble", platform="cli"))
        a.append_messages("s1", [
            Message("user", "the printer shows error E42 again"),
            Message("assistant", "", tool_calls=[ToolCall("t1", "terminal", {"command": "lpstat"})]),
            Message("tool", "printer idle", tool_name="terminal", tool_call_id="t1"),
            Message("assistant", "Clearing the queue fixed E42"),
        ])
        a.open_session(Session(id="s2", parent_session_id="s1"), origin="compression")
        a.append_message("s2", Message("user", "thanks, and the scanner?"))
        a.open_session(Session(id="s3", title="Dinner"))
        a.append_message("s3", Message("user", "pasta recipe 番茄"))
    return home / "state.db"


def test_list_shows_a_chain_once_and_json(run, filled: Path) -> None:
    out = run("sessions", "list").output
    assert "s2" in out and "s1 " not in out and "(+1 compacted)" in out
    assert "Printer trouble #2" in out and "Dinner" in out
    data = json.loads(run("sessions", "list", "--json").output)
    assert [d["id"] for d in data] == ["s3", "s2"]
    assert data[1]["chain_length"] == 2 and data[1]["chain_messages"] == 5
    every = json.loads(run("sessions", "list", "--all", "--json").output)
    assert {d["id"] for d in every} == {"s1", "s2", "s3"}


def test_show_text_and_json(run, filled: Path) -> None:
    out = run("sessions", "show", "s1").output
    assert "Printer trouble" in out and "error E42" in out and "terminal" in out
    assert "children s2" in out
    data = json.loads(run("sessions", "show", "s1", "--json").output)
    assert len(data["messages"]) == 4 and data["children"] == ["s2"]
    assert data["messages"][1]["tool_calls"][0]["arguments"] == {"command": "lpstat"}


def test_show_unknown_session_is_a_clear_error(home: Path, filled: Path) -> None:
    result = CliRunner().invoke(cli, ["sessions", "show", "nope"])
    assert result.exit_code != 0
    assert "no session 'nope'" in result.output


def test_search_text_and_json(run, filled: Path) -> None:
    out = run("sessions", "search", "what about E42?").output
    assert "s1" in out and "E42" in out
    data = json.loads(run("sessions", "search", "printer", "--json", "--limit", "1").output)
    assert len(data["hits"]) == 1 and data["matched"] == "all"
    assert "context_after" in data["hits"][0] or "context_before" in data["hits"][0]
    assert json.loads(run("sessions", "search", "番茄", "--json").output)["hits"]
    assert "No matching" in run("sessions", "search", "xylophone").output


def test_search_with_nothing_searchable_explains(home: Path, filled: Path) -> None:
    result = CliRunner().invoke(cli, ["sessions", "search", "???"])
    assert result.exit_code != 0 and "no letters or digits" in result.output


def test_export_then_import_elsewhere(run, filled: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "chain.jsonl"
    run("sessions", "export", "s2", "--chain", "-o", str(out))
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [x["type"] for x in lines] == ["session", *["message"] * 4, "session", "message"]
    stdout = run("sessions", "export", "s3").output
    assert json.loads(stdout.splitlines()[0])["title"] == "Dinner"
    other = tmp_path / "other-home"
    other.mkdir()
    monkeypatch.setenv("HERMES_CORE_HOME", str(other))
    result = run("sessions", "import", str(out))
    assert "imported 2 session(s), 5 message(s)" in result.output
    report = json.loads(run("sessions", "import", str(out), "--json").output)
    assert report["sessions_skipped"] == 2
    assert json.loads(run("sessions", "search", "E42", "--json").output)["hits"]


def test_import_of_a_big_file_shows_progress_and_a_bad_line_its_number(
    home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "big.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for s in range(60):
            fh.write(json.dumps({"type": "session", "id": f"b{s}"}) + "\n")
            for i in range(20):
                fh.write(json.dumps({"type": "message", "role": "user",
                                     "content": f"bulk {s} {i} " + "lorem " * 150}) + "\n")
        fh.write("{broken\n")
    assert path.stat().st_size > 1_000_000
    result = CliRunner().invoke(cli, ["sessions", "import", str(path)])
    assert result.exit_code != 0
    assert "importing" in result.output  # the progress bar (its label when not a terminal)
    assert "big.jsonl, line 1261: not valid JSON" in result.output
    with SessionArchive(home / "state.db") as a:
        assert a.count_messages() == 59 * 20  # the last session waits for the fix


def test_an_empty_home_lists_nothing_and_creates_nothing(run, home: Path) -> None:
    assert "No sessions yet" in run("sessions", "list").output
    assert json.loads(run("sessions", "list", "--json").output) == []
    assert not (home / "state.db").exists()


def test_a_corrupt_state_db_is_explained_without_a_traceback(home: Path) -> None:
    db = home / "state.db"
    db.write_bytes(b"\x00garbage" * 512)
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "hermes_core", "sessions", "list"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "left untouched" in proc.stderr and "Traceback" not in proc.stderr
    doctor = subprocess.run([sys.executable, "-m", "hermes_core", "doctor"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert "state.db" in doctor.stdout and "left untouched" in doctor.stdout
    assert db.read_bytes() == b"\x00garbage" * 512


def doctor_state_db() -> dict[str, object]:
    from hermes_core.cli.doctor_cmd import run_checks

    return next(c for c in run_checks() if c["name"] == "state.db")


def test_doctor_reports_a_sound_archive(home: Path, filled: Path) -> None:
    check = doctor_state_db()
    expected = f"session archive schema {schema.LATEST_VERSION}, 3 sessions"
    assert check["ok"] and expected in str(check["detail"])


def test_doctor_explains_a_foreign_or_newer_file(home: Path) -> None:
    import sqlite3

    db = home / "state.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE recipes (name TEXT)")
    con.commit()
    con.close()
    check = doctor_state_db()
    assert not check["ok"] and "another application" in str(check["detail"])
    db.unlink()
    SessionArchive(db).close()
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version = 42")
    con.close()
    check = doctor_state_db()
    assert not check["ok"] and "newer hermes-core" in str(check["detail"])


def test_reindex_with_embeddings_off_says_so(run, home: Path, filled: Path) -> None:
    (home / "config.yaml").write_text("embeddings:\n  embedder: none\n")
    result = run("sessions", "reindex", ok=False)
    assert "nothing to do" in result.output and "embeddings.embedder: none" in result.output


def test_reindex_embeds_the_archive_with_the_local_model(run, home: Path, filled: Path) -> None:
    minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")
    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    # a bound for a loaded machine (the default, 10 s per embedding call, is for a user's)
    (home / "config.yaml").write_text("embeddings:\n  timeout: 300\n")
    out = run("sessions", "reindex", "--json").output
    data = json.loads(out[out.index("{"):])  # the progress bar goes to stderr, before it
    with SessionArchive(filled) as a:
        expected = a.db.read("SELECT count(*) FROM messages WHERE role IN ('user', 'assistant') "
                             "AND length(content) > 0")[0][0]
    assert data["embedded"] == expected == data["vectors"] and data["model"].endswith("MiniLM-L6-v2")
    out = run("sessions", "reindex", "--json").output
    again = json.loads(out[out.index("{"):])
    assert again["embedded"] == 0 and again["vectors"] == expected  # resumable: nothing left
