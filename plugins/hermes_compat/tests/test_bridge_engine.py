"""A Hermes context engine's answer, as Hermes reads it: compared by value with what it was sent
(no change keeps the session), the messages it kept unchanged being the ones it was given, and
any history it returns repaired before it is sent. Driven by a real Agent; only the model's words
are scripted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hermes_style
import pytest
from conftest import Words, bridge_agent, drop_folder_plugin

from hermes_core.agent import Agent
from hermes_core.llm import LLMResponse
from hermes_core.types import Usage

#: an engine that changes nothing (lossless-hermes-py answers so when it is off or fails)
SAME = '''
from agent.context_engine import ContextEngine


class Same(ContextEngine):
    name = "same"

    def update_from_response(self, usage):
        pass

    def should_compress(self, prompt_tokens=None):
        return False

    def compress(self, messages, current_tokens=None, focus_topic=None):
        return messages


def register(ctx):
    ctx.register_context_engine(Same())
'''


def _agent(core_home: Path, engine: str) -> Agent:
    return bridge_agent(core_home, f"memory:\n  providers: []\ncontext:\n  engine: {engine}\n")


def test_an_engine_that_changes_nothing_keeps_the_session(core_home: Path) -> None:
    drop_folder_plugin(core_home, "same", SAME)
    agent = _agent(core_home, "hermes-same")
    for text in ("u1", "u2"):
        agent.run_turn(text)
    session, history = agent.session.id, list(agent.history)
    assert agent.compact() is None  # no progress: no child session, no prompt rebuilt
    assert agent.session.id == session
    assert all(a is b for a, b in zip(agent.history, history, strict=True))
    agent.close()


def test_the_messages_an_engine_kept_are_the_ones_it_was_given(core_home: Path) -> None:
    drop_folder_plugin(core_home, "keeplast", hermes_style.ENGINE.format())
    agent = _agent(core_home, "hermes-keeplast")
    for text in ("u1", "u2", "u3"):
        agent.run_turn(text)
    tail = agent.history[-2:]
    assert tail[-1].meta  # the reply carries what the kernel keeps about it (its usage)
    record = agent.compact()
    assert record is not None and record.messages_after < record.messages_before
    assert all(a is b for a, b in zip(agent.history[-2:], tail, strict=True))
    agent.close()


def test_the_engine_hears_each_session_end_as_in_hermes(core_home: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermes calls its engine's ``on_session_end(session_id, messages)`` when a compaction moves
    the conversation on, at /new (then ``on_session_reset()``) and at exit: an engine that keeps
    a store (lossless-hermes-py) takes in there what it has not yet."""
    import json

    logging_engine = hermes_style.ENGINE.format().replace(
        "    def get_tool_schemas(self):\n",
        "    def on_session_end(self, session_id, messages):\n"
        "        self._log('end', session_id, len(messages))\n\n"
        "    def on_session_reset(self):\n"
        "        self._log('reset', None, 0)\n\n"
        "    def _log(self, event, session_id, count):\n"
        "        import json, os\n"
        "        with open(os.environ['ENGINE_LOG'], 'a') as f:\n"
        "            f.write(json.dumps([event, session_id, count]) + '\\n')\n\n"
        "    def get_tool_schemas(self):\n")
    assert logging_engine != hermes_style.ENGINE.format()
    log = core_home / "engine.jsonl"
    monkeypatch.setenv("ENGINE_LOG", str(log))
    drop_folder_plugin(core_home, "keeplast", logging_engine)
    agent = _agent(core_home, "hermes-keeplast")
    for text in ("u1", "u2"):
        agent.run_turn(text)
    first = agent.session.id
    assert agent.compact() is not None
    child = agent.session.id
    agent.run_turn("u3")
    agent.new_session()
    agent.run_turn("v1")
    last = agent.session.id
    agent.close()
    events = [tuple(json.loads(line)) for line in log.read_text().splitlines()]
    assert events == [("end", first, 4), ("end", child, 6), ("reset", None, 0), ("end", last, 2)]


def test_an_engine_tool_gets_the_conversation_so_far(core_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Hermes calls an engine's tool with ``messages=`` (the live history): lossless-hermes-py
    takes them in before it searches, so its search finds what was said earlier in the session."""
    import json

    from hermes_core.types import ToolCall

    seeing = hermes_style.ENGINE.format().replace(
        "    def handle_tool_call(self, name, args, **kwargs):\n        import json\n",
        "    def handle_tool_call(self, name, args, **kwargs):\n        import json\n"
        "        return json.dumps({'seen': [m['content'] for m in kwargs.get('messages', [])]})\n")
    assert seeing != hermes_style.ENGINE.format()
    drop_folder_plugin(core_home, "keeplast", seeing)

    class Asks:
        def __init__(self) -> None:
            self.step = 0

        def respond(self, **kw: Any) -> LLMResponse:
            self.step += 1
            if self.step == 2:
                return LLMResponse(text="", tool_calls=[ToolCall("t1", "keeplast_count", {})],
                                   usage=Usage(input_tokens=10, output_tokens=2))
            return LLMResponse(text="ok", usage=Usage(input_tokens=10, output_tokens=2))

        def complete(self, **kw: Any) -> str:
            return "ok"

    agent = bridge_agent(core_home, "memory:\n  providers: []\ncontext:\n  engine: hermes-keeplast\n",
                         Asks())
    agent.run_turn("My hives are in Rotterdam.")
    result = agent.run_turn("Where are my hives?")
    agent.close()
    seen = json.loads(result.tools[0].content)["seen"]
    assert "My hives are in Rotterdam." in seen and "Where are my hives?" in seen


def test_an_engine_is_asked_with_the_size_of_what_is_sent(core_home: Path) -> None:
    """Hermes asks should_compress with the size of the request about to be sent. With a model
    client that reports no usage (some local servers), the engine was asked with None and never
    compacted; it is now asked with the history's estimate and compacts when it grows."""

    class NoUsage(Words):
        def respond(self, **kw: Any) -> LLMResponse:
            return LLMResponse(text="ok " * 50, usage=Usage())

    drop_folder_plugin(core_home, "keeplast", hermes_style.ENGINE.format())
    # the bridge tells the engine the model's window (2,000 tokens: its threshold is a share)
    agent = bridge_agent(core_home, "memory:\n  providers: []\ncontext:\n  engine: hermes-keeplast\n"
                                    "llm:\n  context_window: 2000\ndelegation:\n  enabled: false\n",
                         NoUsage())
    first = agent.session.id
    for i in range(4):
        agent.run_turn(f"message {i} " + "words " * 300)
    agent.close()
    assert agent.session.id != first  # the engine compacted
