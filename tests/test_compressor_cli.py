"""``hermes-core context show/estimate``: the selected engine's ``describe_context`` plan.

The compressor (the default engine), the lossless engine and a throwaway third-party engine each
answer for themselves; the command only activates the configured one and prints its plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    history = build_history(150)
    path = write_jsonl(tmp_path / "h.jsonl", history)
    code, out = run("context", "estimate", str(path))
    assert code == 0
    assert out.startswith(f"engine compressor: {len(history)} messages")
    assert "threshold 0.5 = 100000 tokens: over it" in out and "a compaction would keep:" in out
    assert "from client" in out  # the anthropic client knows the default model (its table)
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
    history = build_history(150)
    _store(home, "sess-1", history)
    code, out = run("context", "show", "sess-1", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["session_id"] == "sess-1" and data["messages"] == len(history)
    assert data["compaction"]["tail"]["last"] == len(history) - 1
    with pytest.raises(SystemExit):
        main(["context", "show", "no-such-session"])
    assert "no session 'no-such-session'" in capsys.readouterr().err


def test_show_without_a_stored_session_says_what_to_do(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "config.yaml").write_text("memory:\n  providers: []\n")
    with pytest.raises(SystemExit):
        main(["context", "show", "sess-1"])
    err = capsys.readouterr().err
    assert "no session 'sess-1'" in err and "memory.providers" in err
    assert "context estimate" in err and "Traceback" not in err


def _store(home: Path, session_id: str, history: list[Message]) -> None:
    from hermes_core.plugins.memory.session_archive.store import SessionArchive

    with SessionArchive(home / "state.db") as archive:
        archive.open_session(session_id)
        for message in history:
            archive.append_message(session_id, message)


def test_show_reports_the_lossless_plan_when_it_is_selected(home: Path) -> None:
    (home / "config.yaml").write_text("context:\n  engine: lossless\n"
                                      "llm:\n  context_window: 60000\n")
    history = build_history(150)
    _store(home, "sess-2", history)
    code, out = run("context", "show", "sess-2", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["engine"] == "lossless" and data["session_id"] == "sess-2"
    assert data["messages"] == len(history) and data["over_threshold"] is True
    archive = data["archive"]
    assert archive["would_archive_messages"] > 100 and archive["spans_archived"] == 0
    assert "compaction" not in data  # the compressor's plan is not what is shown
    code, out = run("context", "show", "sess-2")
    assert code == 0 and out.startswith(f"engine lossless: {len(history)} messages")
    assert "would archive messages" in out


THIRD_PARTY_ENGINE = """
    from hermes_core import ContextEngine, hookimpl

    class Probe(ContextEngine):
        name = "probe_engine"

        @hookimpl
        def describe_context(self, messages, session):
            where = session.id if session is not None else "a file"
            return {"engine": self.name, "messages": len(messages), "tokens": 7 * len(messages),
                    "context_window": 1000, "threshold_tokens": 500,
                    "over_threshold": 7 * len(messages) >= 500,
                    "lines": [f"probe: {len(messages)} messages from {where}"],
                    "probe_detail": {"roles": sorted({m.role for m in messages})}}

    class Silent(ContextEngine):
        name = "silent_engine"

    class Broken(ContextEngine):
        name = "broken_engine"

        @hookimpl
        def describe_context(self, messages):
            return {"engine": self.name, "lines": ["no counts"]}

    @hookimpl
    def register_context_engines(register):
        register(Probe)
        register(Silent)
        register(Broken)
"""


def test_hook_describe_context(home: Path, dir_plugin: Any, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """A third-party engine's plan is what ``context show`` and ``context estimate`` print."""
    dir_plugin("probe_engines", THIRD_PARTY_ENGINE)
    (home / "config.yaml").write_text("context:\n  engine: probe_engine\n")
    stored, small = build_history(10), build_history(6)
    _store(home, "sess-3", stored)
    code, out = run("context", "show", "sess-3")
    assert code == 0, out
    assert out.strip() == f"probe: {len(stored)} messages from sess-3"
    path = write_jsonl(tmp_path / "h.jsonl", small)
    code, out = run("context", "estimate", str(path), "--json")
    data = json.loads(out)
    assert data["engine"] == "probe_engine"
    assert data["lines"] == [f"probe: {len(small)} messages from a file"]
    assert data["probe_detail"]["roles"] == ["assistant", "tool", "user"]

    # an engine without the hook, and one whose plan lacks the required keys: clear errors
    (home / "config.yaml").write_text("context:\n  engine: silent_engine\n")
    with pytest.raises(SystemExit):
        main(["context", "estimate", str(path)])
    assert "'silent_engine' does not describe its plan" in capsys.readouterr().err
    (home / "config.yaml").write_text("context:\n  engine: broken_engine\n")
    with pytest.raises(SystemExit):
        main(["context", "estimate", str(path)])
    err = capsys.readouterr().err
    assert "'broken_engine' failed to describe its plan" in err and "messages" in err


def test_estimate_reads_the_projects_replay_examples(home: Path) -> None:
    examples = Path(__file__).resolve().parents[1] / "examples"
    code, out = run("context", "estimate", str(examples / "long-incident.jsonl"), "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["engine"] == "compressor" and data["messages"] > 150
    assert data["over_threshold"] is True and data["compaction"]["middle"]["summarised"] > 100
    code, out = run("context", "estimate", str(examples / "first-week.jsonl"))
    assert code == 0, out
    assert out.startswith("the last of 2 sessions in first-week.jsonl")


def test_transcript_lines_are_checked(home: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"meta": {"title": "late"}}\n')
    with pytest.raises(SystemExit):
        main(["context", "estimate", str(path)])
    assert "line 2: a {\"meta\": {...}} line may only be the first line" in capsys.readouterr().err
    path.write_text('{"event": "reboot"}\n')
    with pytest.raises(SystemExit):
        main(["context", "estimate", str(path)])
    assert "line 1: unknown event 'reboot'" in capsys.readouterr().err
