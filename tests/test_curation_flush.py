"""The pre-compaction memory flush, end to end (loopback Messages API; only the words are fake)."""

from __future__ import annotations

import sqlite3
from typing import Any

from test_curation_review import FACT, Recording, _ends_with_tool_result, _text, make_host

from hermes_core import ContextEngine, hookimpl
from hermes_core.agent import Agent
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.plugins.memory.file_memory import FileMemory
from hermes_core.plugins.memory.session_archive import SessionArchiveProvider
from hermes_core.plugins.memory_review.curator import FLUSH_PROMPT
from hermes_core.testing import Failure, MessagesAPIServer, Reply, assert_well_formed
from hermes_core.types import CompressionResult, Message

MARK = FLUSH_PROMPT[:30]


class Halver(ContextEngine):
    """Compacts when the history reaches 6 messages: a summary plus the last two messages."""

    name = "halver"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.inputs: list[list[Message]] = []

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        return len(messages) >= 6

    @hookimpl
    def compress(self, messages, focus_topic, memory_context):
        self.inputs.append(list(messages))
        tail = messages[-1:] if messages[-1].role == "user" else messages[-2:]
        head = Message("user", f"[summary of {len(messages) - len(tail)} messages]")
        if tail[0].role == "user":
            tail = [Message("user", f"{head.content}\n\n{tail[0].content}"), *tail[1:]]
            return CompressionResult(messages=tail)
        return CompressionResult(messages=[head, *tail])


def _host(home, api, memory: str = "  flush_min_turns: 0\n"):
    class Registrar:
        @hookimpl
        def register_context_engines(self, register):
            register(Halver)

    host = make_host(home, providers=[FileMemory, SessionArchiveProvider, Recording], memory=memory,
                     config_text=f"llm:\n  base_url: {api.base_url}\n  api_key: k\n  max_retries: 0\n")
    host.register_plugin("halver_plugin", Registrar())
    host.activate("context-engine", "halver", config_key="context.engine")
    return host


def _responder(flush: Any = None):
    def answer(body: dict[str, Any]) -> Any:
        if MARK in _text(body):
            if flush is not None:
                return flush
            return Reply(tool_calls=[{"name": "memory", "input": {
                "action": "add", "target": "user", "content": FACT}}])
        return "ok" if not _ends_with_tool_result(body) else "done"
    return answer


def test_the_flush_runs_before_each_compaction_and_leaves_no_trace(home):
    with MessagesAPIServer(_responder()) as api:
        host = _host(home, api)
        engine = host.instances["context-engine:halver"]
        recording = host.instances["memory-provider:recording"]
        agent = Agent(host, AnthropicLLM.from_config(host.config.core))
        records = []
        kinds = []
        for n in range(1, 8):
            before = len(api.bodies)
            result = agent.run_turn(f"message {n}")
            records += result.compactions
            kinds += ["flush" if MARK in _text(b) else "turn" for b in api.bodies[before:]]
        manual = agent.compact()
        agent.close()

    assert len(records) >= 2 and manual is not None
    for record in [*records, manual]:
        assert record.flush is not None and record.flush.kind == "flush"
        assert record.flush.calls == 1 and record.flush.error is None
    # one flush request before each compaction, each offering only the memory tool
    flushes = [b for b in api.bodies if MARK in _text(b)]
    assert len(flushes) == len(records) + 1
    assert all([t["name"] for t in b["tools"]] == ["memory"] for b in flushes)
    assert kinds.count("flush") == len(records)
    # its tool call was applied (the second and later adds are duplicates: still one entry)
    assert (home / "memories" / "USER.md").read_text(encoding="utf-8") == f"{FACT}\n"
    assert records[0].flush.writes == [f'added to USER.md: "{FACT}"']
    # ... and it is gone: not in the history, not what the engine compressed, not in any hook
    assert not [m for m in agent.history if MARK in m.content]
    assert_well_formed(agent.history)
    for compressed in engine.inputs:
        assert not [m for m in compressed if MARK in m.content or (m.role == "tool"
                    and "Entry added" in m.content)]
    assert not [s for s in recording.seen if MARK in s]
    with sqlite3.connect(home / "state.db") as con:
        stored = [row[0] for row in con.execute("SELECT content FROM messages")]
    assert stored and not [c for c in stored if MARK in c or FACT in c]
    # the turn after the flush got the real answer, not the flush's
    assert all(b["messages"][-1]["role"] == "user" for b in api.bodies)


def test_a_failing_flush_does_not_stop_the_compaction(home):
    with MessagesAPIServer(_responder(flush=Failure(529, "overloaded"))) as api:
        host = _host(home, api)
        agent = Agent(host, AnthropicLLM.from_config(host.config.core))
        compactions = []
        for n in range(1, 5):
            compactions += agent.run_turn(f"message {n}").compactions
        agent.close()
    assert compactions
    assert compactions[0].flush is not None and compactions[0].flush.error is not None
    assert not (home / "memories" / "USER.md").exists()


def test_no_flush_before_flush_min_turns_or_when_turned_off(home):
    with MessagesAPIServer(_responder()) as api:
        host = _host(home, api, memory="  flush_min_turns: 6\n")
        agent = Agent(host, AnthropicLLM.from_config(host.config.core))
        agent.run_turn("one")
        record = agent.compact()
        assert record is not None and record.flush is None
        agent.close()
    with MessagesAPIServer(_responder()) as api2:
        host = _host(home, api2, memory="  flush_min_turns: 0\n  flush_before_compaction: false\n")
        agent = Agent(host, AnthropicLLM.from_config(host.config.core))
        agent.run_turn("one")
        record = agent.compact()
        assert record is not None and record.flush is None
        agent.close()
    assert not [b for b in api.bodies + api2.bodies if MARK in _text(b)]
