"""What used to travel through duck-typed side channels is now a hook or a typed attribute.

* the engine hears of each turn (``on_turn_start``) and of the prompt's size
  (``on_prompt_assembled``); its ``CompressionResult.report`` reaches the compaction record;
* a tool's prompt guidance (``Tool.guidance``) and its part in curation (``Tool.curation``) travel
  with the tool, so a third-party memory tool is reviewed exactly like the built-in one;
* a misspelled contract name on a kind's base class is refused when the class is defined.

The model's words are scripted (ScriptLLM); the host, the plugins and the tools are real.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_support import ScriptLLM, make_host, reply, tool_reply

from hermes_core import CompressionResult, ContextEngine, MemoryProvider, Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.kinds import Curation, Platform
from hermes_core.plugins.memory_review.curator import Curator, make_job
from hermes_core.toolrun import ToolRouter
from hermes_core.types import Message, Session, ToolContext, Usage


class TurnAwareEngine(ContextEngine):
    name = "turn_aware"
    events: list[tuple[str, Any]] = []

    @hookimpl
    def on_turn_start(self, session: Session) -> None:
        self.events.append(("turn", session.id))

    @hookimpl
    def on_prompt_assembled(self, session: Session, overhead_tokens: int) -> None:
        self.events.append(("prompt", overhead_tokens))

    @hookimpl
    def should_compress(self) -> bool:
        return False

    @hookimpl
    def compress(self, messages: list[Message]) -> CompressionResult:
        return CompressionResult(messages=messages[-2:], report={"kept": 2, "dropped": len(messages) - 2})


def test_hook_on_turn_start(home):
    TurnAwareEngine.events = []
    host = make_host(home, engine=TurnAwareEngine)
    agent = Agent(host, ScriptLLM([reply("one"), reply("two")]))
    first = agent.run_turn("a")
    agent.run_turn("b")
    agent.close()
    turns = [e for e in TurnAwareEngine.events if e[0] == "turn"]
    assert turns == [("turn", first.session_id), ("turn", first.session_id)]


def test_hook_on_prompt_assembled(home):
    TurnAwareEngine.events = []
    host = make_host(home, engine=TurnAwareEngine)
    agent = Agent(host, ScriptLLM([reply("one"), reply("two")]))
    agent.run_turn("a")
    agent.run_turn("b")
    sizes = [v for k, v in TurnAwareEngine.events if k == "prompt"]
    assert len(sizes) == 1 and sizes[0] > len(agent.system_prompt) // 8  # the prompt, estimated
    record = agent.compact()  # the prompt is rebuilt once after a compaction: told again
    agent.close()
    assert record is not None and len([k for k, _ in TurnAwareEngine.events if k == "prompt"]) == 2
    # the engine's report travels on CompressionResult.report into the record
    assert record.engine_report == {"kept": 2, "dropped": 2}


def test_a_report_that_is_not_json_is_logged_not_dropped_silently(home, caplog):
    class OddEngine(TurnAwareEngine):
        name = "odd_engine"

        @hookimpl
        def compress(self, messages: list[Message]) -> CompressionResult:
            return CompressionResult(messages=messages[-2:], report={"when": object()})

    host = make_host(home, engine=OddEngine)
    agent = Agent(host, ScriptLLM([reply("one"), reply("two")]))
    agent.run_turn("a")
    agent.run_turn("b")
    record = agent.compact()
    agent.close()
    assert record is not None and record.engine_report is None
    assert "CompressionResult.report is not JSON-serialisable" in caplog.text


NOTES: list[str] = []


def _note_tool() -> Tool:
    def handler(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        NOTES.append(args["text"])
        return {"ok": True}

    return Tool(
        name="jot",
        description="Write a note that lasts.",
        handler=handler,
        parameters={"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"]},
        guidance="Use `jot` to keep what the user will want next time.",
        curation=Curation(
            role="memory",
            instructions="Each jot is one short sentence.",
            snapshot=lambda: "jotted so far:\n" + "\n".join(f"- {n}" for n in NOTES),
            describe=lambda arguments, result: [f"jotted {arguments['text']!r}"]
            if json.loads(result).get("ok") else [],
        ),
    )


class JotProvider(MemoryProvider):
    name = "jotter"

    @hookimpl
    def get_tools(self) -> list[Tool]:
        return [_note_tool()]


def test_a_third_party_tool_brings_its_guidance_and_is_curated_without_a_name(home):
    NOTES.clear()
    host = make_host(home, providers=[JotProvider])
    agent = Agent(host, ScriptLLM([reply("hi")]))
    agent.run_turn("hello")
    assert "Use `jot` to keep what the user will want next time." in agent.system_prompt
    assert "`memory` tool" not in agent.system_prompt  # no built-in guidance without the tool
    session = agent.session
    job = make_job(host, agent.router, session, list(agent.history), agent.system_prompt)
    assert job is not None and job.memory_tool[0].name == "jot"
    review_llm = ScriptLLM([tool_reply(("jot", {"text": "likes tea"})), reply("done")])
    report = Curator(host, review_llm).run("review", job)
    agent.close()
    assert NOTES == ["likes tea"]
    assert report.writes == ["jotted 'likes tea'"] and report.notice == "memory updated: jotted 'likes tea'"
    prompt = review_llm.calls[0]["messages"][-1].content
    assert "Use the jot tool." in prompt and "Each jot is one short sentence." in prompt
    assert "jotted so far:" in prompt
    assert [t["name"] for t in review_llm.calls[0]["tools"]] == ["jot"]


def test_the_skill_nudge_follows_the_procedures_role(home):
    def save(args: dict[str, Any], context: ToolContext) -> str:
        return "saved"

    recipe = Tool(name="save_recipe", description="Save a procedure.", handler=save,
                  parameters={"type": "object", "properties": {}},
                  curation=Curation(role="procedures", nudge_interval=2))
    curator = Curator(make_host(home, tools=[recipe]))
    router = ToolRouter({"save_recipe": (recipe, "test")})
    other = [tool_reply(("other", {})).tool_calls[0]]
    assert curator.skill_nudge(router, other) is None
    nudge = curator.skill_nudge(router, other)
    assert nudge is not None and "the save_recipe tool" in nudge
    assert curator.skill_nudge(router, [tool_reply(("save_recipe", {})).tool_calls[0]]) is None


def test_curation_and_guidance_are_checked():
    with pytest.raises(ValueError, match="curation role 'memroy' is unknown"):
        Curation(role="memroy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'curation' must be a hermes_core\.kinds\.Curation"):
        Tool(name="t", description="d", handler=lambda a, c: "", parameters={"type": "object"},
             curation={"role": "memory"})  # type: ignore[arg-type]


def test_a_misspelled_contract_name_is_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match="looks like a misspelling of 'dispatcher_options'"):
        class Chatty(Platform):
            name = "chatty"

            def dispatcher_option(self) -> dict[str, Any]:
                return {}

    with pytest.raises(TypeError, match="looks like a misspelling of 'check_ready'"):
        class Guarded(Platform):
            name = "guarded"

            def check_raedy(self) -> None:
                pass

    class Fine(Platform):  # unrelated names are left alone
        name = "fine"

        def greeting(self) -> str:
            return "hi"

    assert Fine(config=None, context=None).dispatcher_options() == {}  # type: ignore[arg-type]


def test_update_from_response_still_reaches_the_engine(home):
    class Counting(TurnAwareEngine):
        name = "counting_usage"
        seen: list[int] = []

        @hookimpl
        def update_from_response(self, usage: Usage) -> None:
            self.seen.append(usage.prompt_tokens)

    host = make_host(home, engine=Counting)
    agent = Agent(host, ScriptLLM([reply("x", Usage(input_tokens=5))]))
    agent.run_turn("a")
    agent.close()
    assert Counting.seen == [5]
