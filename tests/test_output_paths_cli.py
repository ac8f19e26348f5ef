"""Commands that write a file the user names (-o/--out): a path that cannot be written is a clear
error, before the work when it can be told then; no traceback, no half-written file left."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli

ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPT = ROOT / "examples" / "first-week.jsonl"
DATASET = ROOT / "examples" / "eval" / "hermes-mini.json"
#: bounds for a loaded machine (as tests/test_eval_cli.py gives them)
PATIENT = ("--deadline", "300", "--set", "embeddings.timeout=300", "--settle", "900")


def _no_traceback(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception), result.output)


def test_sessions_export_into_a_path_under_a_file(home: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    replay = runner.invoke(cli, ["replay", "--in-place", str(TRANSCRIPT)])
    assert replay.exit_code == 0, replay.output
    work = tmp_path / "work"
    work.mkdir()
    blocker = work / "notes.txt"
    blocker.write_text("mine", encoding="utf-8")
    result = runner.invoke(cli, ["sessions", "export", "--all", "-o", str(blocker / "out.jsonl")])
    _no_traceback(result)
    assert result.exit_code == 1 and str(blocker) in result.output, result.output
    assert "not a folder" in result.output, result.output
    assert blocker.read_text(encoding="utf-8") == "mine"
    good = work / "out.jsonl"
    assert runner.invoke(cli, ["sessions", "export", "--all", "-o", str(good)]).exit_code == 0
    assert sorted(p.name for p in work.iterdir()) == ["notes.txt", "out.jsonl"]


def test_eval_out_under_a_file_is_refused_before_the_run(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", str(DATASET), "--limit", "1", "--json",
                                      "--out", str(blocker / "report.json")])
    _no_traceback(result)
    assert result.exit_code == 2 and "--out" in result.output, result.output
    assert "not a folder" in result.output, result.output
    assert "questions" not in result.output  # refused before any case ran
    ok = CliRunner().invoke(cli, ["eval", str(DATASET), "--limit", "1", "--json", *PATIENT,
                                  "--out", str(tmp_path / "new" / "report.json")])
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "new" / "report.json").read_text())["summary"]


def test_eval_scratch_dir_under_a_file_is_refused(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(cli, ["eval", str(DATASET), "--limit", "1",
                                      "--scratch-dir", str(blocker / "scratch")])
    _no_traceback(result)
    assert result.exit_code == 2 and "--scratch-dir" in result.output, result.output
    assert str(blocker) in result.output and "not a folder" in result.output, result.output


def test_plugins_new_into_a_path_under_a_file_or_onto_a_file(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine", encoding="utf-8")
    (tmp_path / "taken").write_text("mine too", encoding="utf-8")
    for directory, name in ((blocker / "sub", "myplug"), (tmp_path, "taken")):
        result = CliRunner().invoke(cli, ["plugins", "new", name, "--kind", "tool",
                                          "--dir", str(directory)])
        _no_traceback(result)
        assert result.exit_code == 1 and "not a folder" in result.output, result.output
    assert blocker.read_text(encoding="utf-8") == "mine"
    assert (tmp_path / "taken").read_text(encoding="utf-8") == "mine too"


def test_sessions_list_for_a_user_without_sessions_says_whose(home: Path) -> None:
    """'No sessions yet.' for '--user nosuch' read as if the archive were empty."""
    runner = CliRunner()
    assert runner.invoke(cli, ["replay", "--in-place", str(TRANSCRIPT)]).exit_code == 0
    result = runner.invoke(cli, ["sessions", "list", "--user", "nosuch"])
    assert result.exit_code == 0 and "No sessions yet" not in result.output, result.output
    assert "'nosuch'" in result.output and "without --user" in result.output, result.output
