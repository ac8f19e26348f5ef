"""One replayed conversation through the agent loop on both model clients: the anthropic client on
the loopback Messages API and the openai client on the loopback OpenAI-compatible server, each
through its real SDK. The script (the model's words, the only fake) is the same object for both;
the tool calls, the memory written to disk, the compaction and what reached the archive must be
the same too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agent_support import CallLog, engine_class, make_host, note_tool
from openai_support import openai_client

from hermes_core import MemoryProvider, hookimpl
from hermes_core.agent import Agent
from hermes_core.llm import ChatLLM, LLMError, LLMFailure
from hermes_core.plugins.llm.anthropic import AnthropicClient
from hermes_core.plugins.memory.file_memory import FileMemory
from hermes_core.testing import Failure, MessagesAPIServer, OpenAIAPIServer, Reply

SCRIPT = [
    # turn 1: two memory writes in one answer, then the reply
    Reply(text="Saving that.", tool_calls=[
        {"name": "memory", "input": {"action": "add", "target": "user", "content": "Name: Ana"}},
        {"name": "memory", "input": {"action": "add", "target": "user",
                                     "content": "Likes green tea"}}]),
    Reply(text="Noted, Ana."),
    # turn 2 (streamed): two parallel note calls
    Reply(text="Writing notes.", chunk_size=4, tool_calls=[
        {"name": "note", "input": {"text": "buy tea"}},
        {"name": "note", "input": {"text": "call mum"}}]),
    Reply(text="Both noted.", chunk_size=3),
    # turn 3: the history has grown past the engine's threshold: compacted first
    Reply(text="Still here."),
]


def archive_recorder(log: CallLog) -> type[MemoryProvider]:
    class Archive(MemoryProvider):
        name = "archive"

        @hookimpl
        def on_message(self, message):
            calls = "".join(f" | {c.name} {json.dumps(c.arguments, sort_keys=True)}"
                            for c in message.tool_calls)
            log.add(f"{message.role}: {message.content}{calls}")

    return Archive


@contextmanager
def wire(kind: str, home: Path, script: list[Any]) -> Iterator[tuple[Any, ChatLLM]]:
    """A loopback server of the client's API answering ``script``, and the client on it."""
    if kind == "anthropic":
        with MessagesAPIServer(script) as api:
            yield api, AnthropicClient(api_key="test-key", base_url=api.base_url, model="gpt-test",
                                    max_retries=0)
    else:
        with OpenAIAPIServer(script) as api:
            yield api, openai_client(home, api)


CLIENTS = ["anthropic", "openai"]


@pytest.mark.parametrize("kind", CLIENTS)
def test_the_same_conversation_on_both_clients(home, kind):
    log, saved = CallLog(), []
    engine = engine_class(log, compress_when=lambda messages: len(messages) >= 10, keep=2)
    host = make_host(home, providers=[FileMemory, archive_recorder(log)], engine=engine,
                     tools=[note_tool(saved)])
    with wire(kind, home, SCRIPT) as (api, llm):
        agent = Agent(host, llm)
        first = agent.run_turn("I'm Ana and I like green tea.")
        shown: list[str] = []
        second = agent.run_turn("Note: buy tea, call mum.", on_text=shown.append)
        third = agent.run_turn("Are you there?")
        agent.close()
        requests = len(api.bodies)

    assert requests == 5
    assert [r.reply for r in (first, second, third)] == ["Noted, Ana.", "Both noted.", "Still here."]
    calls = [(o.call.name, o.call.arguments) for r in (first, second) for o in r.tools]
    assert calls == [
        ("memory", {"action": "add", "target": "user", "content": "Name: Ana"}),
        ("memory", {"action": "add", "target": "user", "content": "Likes green tea"}),
        ("note", {"text": "buy tea"}), ("note", {"text": "call mum"})]
    assert not any(o.is_error for r in (first, second) for o in r.tools)
    assert sorted(saved) == ["buy tea", "call mum"]
    assert (home / "memories" / "USER.md").read_text(encoding="utf-8") == (
        "Name: Ana\n§\nLikes green tea\n")
    assert "".join(shown) == "Writing notes.\n\nBoth noted."
    assert [len(r.compactions) for r in (first, second, third)] == [0, 0, 1]
    assert [m.role for m in agent.history] == ["user", "assistant", "user", "assistant"]
    assert [e.split(" focus")[0] for e in log.names() if e.startswith("compress ")] == [
        "compress 11"]
    archived = [e for e in log.names() if e.split(":")[0] in ("user", "assistant", "tool")]
    assert archived == [
        "user: I'm Ana and I like green tea.",
        'assistant: Saving that. | memory {"action": "add", "content": "Name: Ana", "target": "user"}'
        ' | memory {"action": "add", "content": "Likes green tea", "target": "user"}',
        *archived[2:4],  # the two memory tool results (their wording is file_memory's)
        "assistant: Noted, Ana.",
        "user: Note: buy tea, call mum.",
        'assistant: Writing notes. | note {"text": "buy tea"} | note {"text": "call mum"}',
        'tool: {"saved": "buy tea"}', 'tool: {"saved": "call mum"}',
        "assistant: Both noted.",
        "user: Are you there?",
        # the compaction: the child session starts from the summary and the kept tail
        "user: [summary of 9 messages]", "assistant: Both noted.", "user: Are you there?",
        "assistant: Still here."]
    assert all(e.startswith("tool: ") and "success" in e for e in archived[2:4])


@pytest.mark.parametrize("kind", CLIENTS)
def test_a_failed_call_leaves_no_half_written_assistant_turn(home, kind):
    log = CallLog()
    script: list[Any] = [Reply(text="Noting.", tool_calls=[{"name": "note", "input": {"text": "x"}}]),
                         Failure(401, "invalid key")]
    host = make_host(home, providers=[archive_recorder(log)], tools=[note_tool([])])
    with wire(kind, home, script) as (api, llm):
        agent = Agent(host, llm)
        with pytest.raises(LLMError) as err:
            agent.run_turn("note x", on_text=lambda _d: None)
        agent.close()
        statuses = [r.status for r in api.requests]
    assert err.value.failure is LLMFailure.AUTH and statuses == [200, 401]
    # the user message, the tool call and its result are whole; no assistant reply was archived
    assert [e.split(":")[0] for e in log.names()] == ["user", "assistant", "tool"]
    assert [m.role for m in agent.history] == ["user", "assistant", "tool"]


def test_a_broken_tool_call_is_answered_with_an_error_the_model_reads(home):
    """openai only: the Messages API sends arguments as a JSON object, never as text."""
    saved: list[str] = []
    script: list[Any] = [Reply(tool_calls=[{"name": "note", "arguments": '{"text": "half'}]),
                         Reply(tool_calls=[{"name": "note", "input": {"text": "whole"}}]),
                         Reply(text="Saved.")]
    host = make_host(home, tools=[note_tool(saved)])
    with wire("openai", home, script) as (api, llm):
        agent = Agent(host, llm)
        result = agent.run_turn("note something")
        agent.close()
        bodies = api.bodies
    assert result.reply == "Saved." and saved == ["whole"]  # the broken call never ran
    assert result.tools[0].is_error and "not valid JSON" in result.tools[0].content
    answer = bodies[1]["messages"][-1]
    assert answer["role"] == "tool" and answer["content"].startswith("Error: the arguments")
    # the call is sent back as the model made it, with an empty object for its arguments
    assert bodies[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"] == "{}"

