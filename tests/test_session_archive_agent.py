"""The session archive inside the real agent loop: every message archived as it happens, a
compaction continuing the conversation in a child session, and the model calling session_search.
Only the LLM's words are scripted (ScriptLLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import CallLog, ScriptLLM, engine_class, make_host, reply, tool_reply
from archive_support import make_archive

from hermes_core.agent import Agent
from hermes_core.plugins.memory.session_archive import SessionArchiveProvider
from hermes_core.types import Usage


def test_turns_compaction_and_session_search_through_the_agent(
    home: Path, storage_url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    log = CallLog()
    engine = engine_class(log, compress_when=lambda messages: len(messages) >= 6)
    host = make_host(home, providers=[SessionArchiveProvider], engine=engine)
    llm = ScriptLLM([reply("noted: the pelican migrates in May"), reply("a1"), reply("a2"),
                     reply("a3")])
    agent = Agent(host, llm)
    first = agent.session
    agent.run_turn("remember the pelican migration")
    for i in range(1, 4):
        agent.run_turn(f"u{i}")
    child = agent.session
    provider = next(iter(host.instances.values()))
    assert isinstance(provider, SessionArchiveProvider)
    provider.record_usage(child.id, Usage(input_tokens=10, output_tokens=2))
    agent.close()

    with make_archive(home, storage_url) as archive:
        parent = archive.get_session(first.id)
        assert child.parent_session_id == first.id
        assert (parent.end_reason, parent.superseded) == ("compression", True)
        assert archive.get_session(child.id).end_reason == "user_exit"
        # four model calls of 100 input tokens each, counted once in the session that made
        # them (not again for the copies a compaction carries over), plus the manual record
        child_tokens = archive.get_session(child.id).input_tokens
        assert parent.input_tokens + child_tokens == 4 * 100 + 10
        assert parent.input_tokens >= 100 and child_tokens >= 110
        assert [m.content for m in archive.messages(first.id)][:2] == [
            "remember the pelican migration", "noted: the pelican migrates in May"]
        kept = [m for m in archive.messages(child.id) if m.meta.get("carried_over")]
        assert kept, "the compaction carried messages into the child"
        (listed,) = archive.list_sessions()
        assert listed.id == child.id and listed.chain_length == 2

    # A new conversation: the model searches the archive and gets the earlier one back.
    host2 = make_host(home, providers=[SessionArchiveProvider], engine=None)
    llm2 = ScriptLLM([tool_reply(("session_search", {"query": "when does the pelican migrate?"})),
                      reply("In May.")])
    agent2 = Agent(host2, llm2)
    result = agent2.run_turn("what did we say about the pelican?")
    agent2.close()
    assert result.reply == "In May."
    tool_message = llm2.calls[1]["messages"][-1]
    found = json.loads(tool_message.content)
    assert found["results"][0]["session_id"] == child.id  # the chain, under its newest session
    assert any("pelican" in h["snippet"] for h in found["results"][0]["hits"])
    with make_archive(home, storage_url) as archive:
        roles = [m.role for m in archive.messages(agent2.session.id)]
        assert roles == ["user", "assistant", "tool", "assistant"]
