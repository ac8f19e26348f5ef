"""hermes-core replay: the transcript format, the driver's report, the CLI and the shipped examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import CallLog, make_host
from click.testing import CliRunner

from hermes_core import CompressionResult, ContextEngine, MemoryProvider, MemoryWrite, Message, Tool, hookimpl
from hermes_core.cli import cli
from hermes_core.replay import RecordingHost, ReplayError, ReplayLLM, parse_transcript, replay

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def lines(*objs) -> list[str]:
    return [json.dumps(o) if not isinstance(o, str) else o for o in objs]


U = {"role": "user", "content": "hello"}
A = {"role": "assistant", "content": "hi"}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "name": "note",
                                                              "arguments": {"text": "x"}}]}


def test_parse_a_well_formed_transcript():
    t = parse_transcript(lines(
        {"meta": {"title": "demo"}}, U, CALL, {"role": "tool", "tool_call_id": "t1", "content": "ok"},
        {**A, "usage": {"input_tokens": 10, "cache_read_tokens": 90}}, "",
        {"event": "new_session"}, {"role": "user", "content": "again"}, A,
    ), name="demo.jsonl")
    assert t.meta == {"title": "demo"}
    assert [(turn.line, turn.user, turn.new_session) for turn in t.turns] == [
        (2, "hello", False), (8, "again", True)]
    first = t.turns[0].responses
    assert [r.line for r in first] == [3, 5]
    assert first[0].tool_calls[0].arguments == {"text": "x"} and first[0].results == {"t1": "ok"}
    assert first[1].usage.prompt_tokens == 100


@pytest.mark.parametrize(
    ("content", "line", "message"),
    [
        ([json.dumps(U), "{not json"], 2, "not valid JSON"),
        ([json.dumps(U), "[1, 2]"], 2, "expected a JSON object"),
        ([json.dumps(A)], 1, "must start with a user line"),
        ([json.dumps({"role": "robot", "content": "x"})], 1, "'role' must be"),
        ([json.dumps({"role": "user", "contnet": "x"})], 1, "unknown key 'contnet'"),
        ([json.dumps({"role": "user", "content": 5})], 1, "'content' must be a string"),
        ([json.dumps(U), json.dumps(U)], 2, "has no assistant response"),
        (lines(U, CALL, U, A), 3, "tool calls on line 2 are never followed"),
        (lines(U, CALL), 2, "never followed by an assistant response"),
        (lines(U, A, A), 3, "the model's turn was over"),
        (lines(U, A, {"role": "tool", "tool_call_id": "zz", "content": "r"}), 3, "answers no tool call"),
        (lines(U, {"role": "assistant", "content": ""}), 2, "needs 'content' text or 'tool_calls'"),
        (lines(U, {**A, "usage": {"input_tokens": -1}}), 2, "'usage' must map"),
        (lines(U, {**A, "tool_calls": [{"name": "bad name!"}]}), 2, "not a valid tool name"),
        (lines(U, {**A, "tool_calls": [{"name": "x", "arguments": [1]}]}), 2, "must be a JSON object"),
        (lines(U, A, {"meta": {}}), 3, "may only be the first line"),
        (lines(U, A, {"event": "reboot"}), 3, "unknown event"),
    ],
)
def test_malformed_transcripts_name_the_line(content, line, message):
    with pytest.raises(ReplayError) as err:
        parse_transcript(content, name="bad.jsonl")
    assert f"bad.jsonl, line {line}: " in str(err.value)
    assert message in str(err.value)


def test_empty_transcript_and_missing_file(tmp_path):
    with pytest.raises(ReplayError, match="no turns found"):
        parse_transcript(["", "  "], name="empty.jsonl")
    from hermes_core.replay import load_transcript

    with pytest.raises(ReplayError, match="no such file"):
        load_transcript(tmp_path / "nope.jsonl")


def test_replay_llm_answers_in_order_and_estimates_usage():
    t = parse_transcript(lines(U, CALL, A))
    llm = ReplayLLM(chunk_size=1)
    llm.load_turn(t.turns[0])
    first = llm.respond(system="s" * 400, messages=[Message("user", "hello")], max_tokens=10)
    assert first.tool_calls[0].name == "note" and first.usage.input_tokens > 100
    streamed: list[str] = []
    second = llm.respond(system="", messages=[], max_tokens=10, on_text=streamed.append)
    assert second.text == "hi" and streamed == ["h", "i"]
    with pytest.raises(Exception, match="no more recorded responses"):
        llm.respond(system="", messages=[], max_tokens=10)


def test_replay_reports_what_each_plugin_did(home):
    log = CallLog()

    class Recall(MemoryProvider):
        name = "recall"

        @hookimpl
        def prefetch(self, query):
            return f"recalled for {query}"

        @hookimpl
        def get_tools(self):
            def note(args, ctx):
                self.context.notify_memory_write(MemoryWrite("add", "notes", args["text"],
                                                             provider="recall"))
                return "saved"
            return [Tool(name="note", description="save", handler=note,
                         parameters={"type": "object", "properties": {"text": {"type": "string"}}})]

    class Broken(MemoryProvider):
        name = "broken"

        @hookimpl
        def sync_turn(self):
            raise ValueError("disk full")

        @hookimpl
        def on_message(self):
            raise ValueError("cannot archive")

    class Halver(ContextEngine):
        name = "halver"

        @hookimpl
        def should_compress(self, messages):
            return len(messages) >= 5

        @hookimpl
        def compress(self, messages):
            log.add("compress")
            keep = messages[-1:]
            return CompressionResult([Message("user", "[summary]\n\n" + keep[0].content)],
                                     summary="summary", notices=["halved"])

    host = make_host(home, providers=[Recall, Broken], engine=Halver, host_cls=RecordingHost,
                     activate=False)
    transcript = parse_transcript(lines(
        U, CALL, A,
        {"role": "user", "content": "second"}, {"role": "assistant", "content": "two"},
        {"event": "new_session"}, {"role": "user", "content": "third"}, {"role": "assistant", "content": "3"},
    ), name="t.jsonl")
    seen: list[int] = []
    report = replay(transcript, host, on_turn=lambda t: seen.append(t["turn"]))
    data = report.as_dict()
    json.dumps(data)  # the --json output is plain JSON
    assert seen == [1, 2, 3]
    assert data["providers"] == ["recall", "broken"] and data["engine"] == "halver"
    t1, t2, t3 = data["turns"]
    (p,) = t1["prefetch"]
    assert (p["provider"], p["status"], p["text"], p["error"]) == (
        "recall", "fresh", "recalled for hello", None)
    assert t1["recall_chars"] > len("recalled for hello")
    assert t1["tool_calls"][0]["name"] == "note" and t1["tool_calls"][0]["ok"]
    assert t1["tool_calls"][0]["plugin"] == "memory-provider:recall"
    assert t1["memory_writes"] == [{"provider": "recall", "action": "add", "target": "notes",
                                    "content": "x", "old_text": None, "origin": "assistant_tool"}]
    assert t1["llm_calls"] == 2 and t1["compactions"] == []
    assert any("memory-provider:broken" in line and "cannot archive" in line for line in t1["log"])
    # turn 2 crossed the engine's threshold: one compaction into a child session
    (c,) = t2["compactions"]
    assert c["messages_before"] == 5 and c["messages_after"] == 1 and c["notices"] == ["halved"]
    assert c["tokens_after"] < c["tokens_before"] and t2["session_id"] == c["new_session_id"]
    assert t2["system_prompt"]["rebuilds"] == 1 and t2["system_prompt"]["stable"]
    assert t3["new_session"] and t3["system_prompt"]["rebuilds"] == 1
    assert t1["system_prompt"] == {**t1["system_prompt"], "changes": 0, "rebuilds": 0, "stable": True}
    summary = data["summary"]
    assert summary["turns"] == 3 and summary["compactions"] == 1 and summary["memory_writes"] == 1
    assert summary["system_prompt_stable"] is True
    assert summary["sessions"] == 3
    assert summary["worker_drain"]["abandoned"] == []


def _run_cli(home: Path, *args: str):
    return CliRunner().invoke(cli, ["replay", *args], env={"HERMES_CORE_HOME": str(home)},
                              catch_exceptions=False)


def test_cli_names_the_bad_line_without_a_traceback(home, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(U) + "\n" + "{oops\n")
    result = _run_cli(home, str(bad))
    assert result.exit_code == 1
    assert "bad.jsonl, line 2: not valid JSON" in result.output
    assert "Traceback" not in result.output


def test_cli_replays_the_quick_start_example_in_a_scratch_home(home):
    result = _run_cli(home, str(EXAMPLES / "first-week.jsonl"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"]["turns"] == 6 and data["summary"]["system_prompt_stable"]
    writes = [w for t in data["turns"] for w in t["memory_writes"]]
    assert {w["target"] for w in writes} == {"user", "memory"}
    assert all(c["ok"] for t in data["turns"] for c in t["tool_calls"])
    # the new session's prompt carries what the first session saved
    assert data["turns"][4]["system_prompt"]["changes"] == 1
    assert data["turns"][4]["system_prompt"]["rebuilds"] == 1
    assert not (home / "memories").exists()  # the real home was not touched
    text = _run_cli(home, str(EXAMPLES / "first-week.jsonl"))
    assert text.exit_code == 0 and "summary" in text.output and "turns/s" in text.output


def test_cli_in_place_writes_the_real_home(home):
    result = _run_cli(home, str(EXAMPLES / "first-week.jsonl"), "--json", "--in-place")
    assert result.exit_code == 0, result.output
    assert "Priya" in (home / "memories" / "USER.md").read_text()


def test_every_example_is_valid():
    from hermes_core.replay import load_transcript

    files = sorted(EXAMPLES.glob("*.jsonl"))
    assert len(files) >= 2
    for path in files:
        assert load_transcript(path).turns


def test_the_long_example_compacts_at_default_settings(home):
    result = _run_cli(home, str(EXAMPLES / "long-incident.jsonl"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"] == "claude-sonnet-4-6" and data["engine"] == "compressor"
    compactions = [c for t in data["turns"] for c in t["compactions"]]
    assert len(compactions) >= 1
    first = compactions[0]
    assert first["tokens_before"] > data["context_window"] // 2 > first["tokens_after"]
    assert data["summary"]["system_prompt_stable"]


def test_the_returning_user_example_finds_the_first_session(home):
    result = _run_cli(home, str(EXAMPLES / "returning-user.jsonl"), "--json",
                      "--provider", "file_memory", "--provider", "session_archive")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    first_session = data["turns"][0]["session_id"]
    (search,) = data["turns"][3]["tool_calls"]
    assert search["name"] == "session_search" and search["ok"]
    assert search["plugin"] == "memory-provider:session_archive"
    found = json.loads(search["result"])
    assert found["results"][0]["session_id"] == first_session
    assert "SQS FIFO" in search["result"]
    # the preference saved in session 1 is in session 2's prompt (via the file memory snapshot)
    assert data["turns"][3]["system_prompt"]["changes"] == 1


def test_the_command_is_the_replay_plugins_and_says_so_when_disabled(home):
    """``replay`` is a first-party plugin's command: the library stays the kernel's, the command
    goes with its plugin."""
    from hermes_core.cli import COMMANDS, SHORT_HELP
    from hermes_core.host import RESERVED_COMMANDS, PluginHost

    assert "replay" not in COMMANDS and "replay" not in SHORT_HELP
    assert "replay" not in RESERVED_COMMANDS
    assert PluginHost.load(entry_points=False, directories=False).commands["replay"][1] == "replay"
    assert CliRunner().invoke(cli, ["--help"]).exit_code == 0  # the command index knows it
    (home / "config.yaml").write_text("plugins:\n  disabled: [replay]\n")
    gone = _run_cli(home, str(EXAMPLES / "first-week.jsonl"))
    assert gone.exit_code == 1
    assert ("the command 'replay' is provided by the plugin 'replay', which is disabled; enable "
            "it with 'hermes-core plugins enable replay'") in gone.output


def test_the_commands_old_home_warns_and_still_resolves():
    import hermes_core.cli.replay_cmd as old
    from hermes_core.plugins.replay.commands import replay as command

    with pytest.warns(DeprecationWarning, match="moved to hermes_core.plugins.replay.commands"):
        assert old.replay is command
