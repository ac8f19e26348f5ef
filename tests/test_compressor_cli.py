"""``hermes-core context estimate FILE.jsonl``: a thin layer over the compressor's plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from compressor_support import build_history

from hermes_core.cli import cli, main
from hermes_core.types import Message


def write_jsonl(path: Path, messages: list[Message], *, openai_style: bool = False) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for m in messages:
            if openai_style:
                calls = [{"id": c.id, "type": "function",
                          "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                         for c in m.tool_calls]
            else:
                calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            fh.write(json.dumps({"role": m.role, "content": m.content, "tool_calls": calls,
                                 "tool_call_id": m.tool_call_id, "tool_name": m.tool_name}) + "\n")
            if m.role == "user":
                fh.write("\n")  # blank lines are skipped
    return path


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize("openai_style", [False, True])
def test_estimate_json(home: Path, tmp_path: Path, openai_style: bool) -> None:
    (home / "config.yaml").write_text("llm:\n  context_window: 60000\ncompression:\n  threshold: 0.5\n")
    history = build_history(150)
    path = write_jsonl(tmp_path / "h.jsonl", history, openai_style=openai_style)
    code, out = run("context", "estimate", str(path), "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["messages"] == len(history)
    assert data["context_window"] == 60_000 and data["context_window_source"] == "config"
    assert data["threshold_tokens"] == 30_000 and data["over_threshold"] is True
    c = data["compaction"]
    assert c["head"]["first"] == 0 and c["tail"]["last"] == len(history) - 1
    assert c["tail"]["messages"] >= 20 and c["middle"]["summarised"] > 100
    assert c["tokens_after_estimate"] < data["threshold_tokens"] < data["tokens"]
    assert c["old_tool_outputs_cleared"] > 0 and c["summary_budget_tokens"] >= 1_000


def test_estimate_text_and_nothing_to_compact(home: Path, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "h.jsonl", build_history(150))
    code, out = run("context", "estimate", str(path))
    assert code == 0
    assert "threshold 0.5 = 100000 tokens: over it" in out and "a compaction would keep:" in out
    assert "from table" in out  # the default model is in the window table
    small = write_jsonl(tmp_path / "s.jsonl", build_history(2))
    code, out = run("context", "estimate", str(small))
    assert "a compaction would change nothing" in out


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"role": "user", "content": "hi"}\nnot json\n', "line 2: not valid JSON"),
        ('{"role": "robot", "content": "hi"}\n', "line 1: 'role' must be one of"),
        ('{"role": "assistant", "tool_calls": [{"id": "x"}]}\n', "needs a 'name'"),
    ],
)
def test_bad_files_name_the_line(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, error: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["context", "estimate", str(path)])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert error in err and "Traceback" not in err


def test_bad_threshold_in_config_is_reported(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.yaml").write_text("compression:\n  threshold: 1.5\n")
    path = write_jsonl(tmp_path / "h.jsonl", build_history(3))
    with pytest.raises(SystemExit):
        main(["context", "estimate", str(path)])
    err = capsys.readouterr().err
    assert "compression.threshold" in err and "strictly between 0 and 1" in err


def test_show_reads_a_stored_session(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hermes_core.plugins.memory.session_archive.store import SessionArchive

    history = build_history(150)
    with SessionArchive(home / "state.db") as archive:
        archive.open_session("sess-1")
        for message in history:
            archive.append_message("sess-1", message)
    code, out = run("context", "show", "sess-1", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["session_id"] == "sess-1" and data["messages"] == len(history)
    assert data["compaction"]["tail"]["last"] == len(history) - 1
    with pytest.raises(SystemExit):
        main(["context", "show", "no-such-session"])
    assert "no session 'no-such-session'" in capsys.readouterr().err


def test_show_without_an_archive_says_how_to_get_one(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["context", "show", "sess-1"])
    err = capsys.readouterr().err
    assert "no session archive" in err and "memory.providers" in err
    assert not (home / "state.db").exists()
