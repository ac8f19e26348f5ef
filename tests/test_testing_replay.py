"""The replay helper of hermes_core.testing: real plugins, scripted words, a report to assert on."""

from __future__ import annotations

import types

import pytest

from hermes_core import MemoryProvider, hookimpl
from hermes_core.replay import ReplayError
from hermes_core.testing import run_replay, transcript_from


def keyword_memory() -> tuple[types.SimpleNamespace, list[str]]:
    """A throwaway provider: remembers user messages, recalls those sharing a word with the query."""
    synced: list[str] = []

    class Keywords(MemoryProvider):
        name = "keywords"

        @hookimpl
        def sync_turn(self, user_message, assistant_message, session, messages):
            synced.append(user_message.content)

        @hookimpl
        def prefetch(self, query, session):
            words = {w.strip("?.,").lower() for w in query.split() if len(w) > 3}
            hits = [s for s in synced if words & {w.strip("?.,").lower() for w in s.split()}]
            return "\n".join(hits) or None

    @hookimpl
    def register_memory_providers(register):
        register(Keywords)

    return types.SimpleNamespace(register_memory_providers=register_memory_providers), synced


def test_inline_turns_run_through_real_plugins(hermes_home):
    plugin, synced = keyword_memory()
    report = run_replay(
        hermes_home,
        [("I use Helix as my editor", "Noted."),
         {"user": "which editor do I use?", "assistant": "Helix.", "new_session": True}],
        plugins=[("keywords", plugin)], providers=["file_memory", "keywords"],
    )
    assert report.summary["turns"] == 2
    assert report.summary["sessions"] == 2
    assert synced == ["I use Helix as my editor", "which editor do I use?"]
    recalled = {p["provider"]: p["text"] for p in report.turns[1]["prefetch"]}
    assert "Helix" in recalled["keywords"]
    assert report.turns[1]["reply"] == "Helix."


def test_tool_calls_are_run_by_the_owning_plugin(hermes_home):
    report = run_replay(hermes_home, [
        {"user": "remember that I like green tea",
         "tool_calls": [{"name": "memory", "arguments": {"action": "add", "target": "user",
                                                          "content": "likes green tea"}}],
         "assistant": "Saved."},
    ])
    (call,) = report.turns[0]["tool_calls"]
    assert call["name"] == "memory" and call["ok"], call
    assert "likes green tea" in (hermes_home / "memories" / "USER.md").read_text(encoding="utf-8")
    assert report.summary["memory_writes"] == 1


def test_transcript_file_and_fixture(hermes_replay, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "hello"}\n')
    report = hermes_replay(path, providers=["session_archive"])
    assert [t["reply"] for t in report.turns] == ["hello"]
    assert report.providers == ["session_archive"]


def test_engine_and_config_text(hermes_home):
    report = run_replay(hermes_home, [("a", "b")], engine="lossless",
                        config="memory:\n  providers: []\n")
    assert report.engine == "lossless"
    assert report.providers == []


@pytest.mark.parametrize("bad, message", [
    ([("only user",)], r"inline turn 1: a tuple must be \(user text"),
    ([42], "got int"),
    ([{"assistant": "no user"}], "needs a 'user' text"),
])
def test_bad_inline_turns_name_the_turn(bad, message):
    with pytest.raises(TypeError, match=message):
        transcript_from(bad)


def test_bad_transcript_line_is_a_replay_error():
    with pytest.raises(ReplayError, match="line"):
        transcript_from([{"role": "assistant", "content": "no user turn before me"}])


def test_canned_llm_drives_an_agent_and_streams(hermes_home):
    from hermes_core.agent import Agent
    from hermes_core.testing import CannedLLM, make_host
    from hermes_core.types import Usage

    llm = CannedLLM("a fixed answer", usage=Usage(input_tokens=7), chunk=4)
    agent = Agent.create(make_host(hermes_home), llm)
    pieces: list[str] = []
    try:
        result = agent.run_turn("hello", on_text=pieces.append)
    finally:
        agent.close()
    assert result.reply == "a fixed answer" and "".join(pieces) == "a fixed answer"
    assert len(pieces) == 4 and llm.calls == 1
    assert result.usage[0].input_tokens == 7
