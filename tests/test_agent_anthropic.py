"""End to end: the agent loop through the real anthropic SDK against the loopback Messages API.

The server (hermes_core.testing.MessagesAPIServer) is a real HTTP server on 127.0.0.1 speaking JSON
and SSE; only the model's words come from its script.
"""

from __future__ import annotations

import threading
import time

import pytest
from agent_support import CallLog, engine_class, make_host, recorder

from hermes_core import ContextEngine, MemoryProvider, Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.fence import FENCE_OPEN
from hermes_core.llm import LLMError, LLMFailure
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.testing import Failure, MessagesAPIServer, Reply


class Recall(MemoryProvider):
    name = "recall"

    @hookimpl
    def prefetch(self, query):
        return "The user's cat is called Miso."

    @hookimpl
    def system_prompt_block(self):
        return "USER: prefers short answers"


def usage_log(log: CallLog):
    class Meter(ContextEngine):
        name = "meter"

        @hookimpl
        def update_from_response(self, usage):
            log.add(f"usage in={usage.input_tokens} read={usage.cache_read_tokens} "
                    f"write={usage.cache_write_tokens} prompt={usage.prompt_tokens}")

    return Meter


def note_tool(saved: list[str]) -> Tool:
    return Tool(
        name="note", description="Save a note.", parallel_safe=True,
        parameters={"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"]},
        handler=lambda args, ctx: saved.append(args["text"]) or {"saved": args["text"]},
    )


def llm_for(api: MessagesAPIServer, **kw) -> AnthropicLLM:
    return AnthropicLLM(api_key="test-key", base_url=api.base_url, model="claude-test", **kw)


def test_streamed_turn_with_tools_caching_and_usage(home):
    log = CallLog()
    saved: list[str] = []
    echoed = f"Noted. {FENCE_OPEN}\nThe user's cat is called Miso.\n</memory-context> Anything else?"
    script = [
        Reply(text="Saving that.", tool_calls=[
            {"name": "note", "input": {"text": "cat: Miso"}},
            {"name": "note", "input": {"text": "likes tea"}},
        ]),
        Reply(text=echoed, chunk_size=5,
              usage={"input_tokens": 12, "output_tokens": 9, "cache_read_input_tokens": 900,
                     "cache_creation_input_tokens": 40}),
    ]
    with MessagesAPIServer(script) as api:
        host = make_host(home, providers=[Recall], engine=usage_log(log), tools=[note_tool(saved)])
        agent = Agent(host, llm_for(api))
        shown: list[str] = []
        result = agent.run_turn("Remember my cat Miso and that I like tea.", on_text=shown.append)
        agent.close()
        bodies = api.bodies

    assert sorted(saved) == ["cat: Miso", "likes tea"]  # parallel-safe: run in either order
    assert all(o.parallel for o in result.tools)
    # the user saw the reply without the echoed block, while it streamed
    assert "".join(shown) == "Saving that.\n\nNoted.  Anything else?"
    assert result.reply == "Noted.  Anything else?"
    assert len(bodies) == 2 and all(b["stream"] for b in bodies)
    first, second = bodies
    # system_and_3 caching: the system prompt and the last messages carry breakpoints
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "USER: prefers short answers" in first["system"][0]["text"]
    assert first["system"] == second["system"]  # byte-identical within the session
    assert [t["name"] for t in first["tools"]] == ["note"]
    user_text = first["messages"][0]["content"][0]["text"]
    assert user_text.startswith("Remember my cat Miso and that I like tea.\n\n" + FENCE_OPEN)
    assert "## recall\nThe user's cat is called Miso." in user_text
    # the second request answers both tool_use blocks, recall still on the same user message
    assert second["messages"][0]["content"][0]["text"] == user_text
    results = [b for b in second["messages"][2]["content"] if b["type"] == "tool_result"]
    assert [r["content"] for r in results] == ['{"saved": "cat: Miso"}', '{"saved": "likes tea"}']
    # usage reached the context engine, cache reads and writes included
    assert log.names()[-1] == "usage in=12 read=900 write=40 prompt=952"


def test_non_streaming_turn_and_sdk_retries(home):
    with MessagesAPIServer([Failure(529), Failure(429), "All good."]) as api:
        agent = Agent(make_host(home), llm_for(api, max_retries=2))
        result = agent.run_turn("status?")
        agent.close()
        statuses = [r.status for r in api.requests]
    assert result.reply == "All good."
    assert statuses == [529, 429, 200]
    assert "stream" not in api.bodies[0]


def test_an_llm_failure_fails_the_turn_but_keeps_the_archived_message(home):
    log = CallLog()

    class Archive(MemoryProvider):
        name = "archive"

        @hookimpl
        def on_message(self, message):
            log.add(f"{message.role}: {message.content}")

    with MessagesAPIServer([Failure(401, "invalid x-api-key")]) as api:
        agent = Agent(make_host(home, providers=[Archive]), llm_for(api, max_retries=0))
        with pytest.raises(LLMError) as err:
            agent.run_turn("hello?")
        agent.close()
    assert err.value.failure is LLMFailure.AUTH and err.value.status == 401
    assert log.names() == ["user: hello?"]
    assert [m.content for m in agent.history] == ["hello?"]


def test_a_provider_sleeping_ten_seconds_costs_at_most_the_deadline(home):
    class Sleeper(MemoryProvider):
        name = "sleeper"
        calls = 0

        @hookimpl
        def prefetch(self, query):
            Sleeper.calls += 1
            if Sleeper.calls > 1:
                time.sleep(10)
            return "quick the first time"

    arrivals: list[float] = []

    def responder(body):
        arrivals.append(time.perf_counter())
        return "ok"

    with MessagesAPIServer(responder) as api:
        host = make_host(home, providers=[Sleeper])
        host.config.core.memory.prefetch_timeout = 0.3
        agent = Agent(host, llm_for(api))
        agent.run_turn("warm up")  # imports the SDK and opens the connection
        start = time.perf_counter()
        result = agent.run_turn("second")
        agent.close()
    waited = arrivals[-1] - start
    # the 0.3 s deadline, not the provider's 10 s sleep, bounds the wait: a bound far from both,
    # so a loaded machine does not decide the outcome
    assert waited < 3, f"the request left {waited:.3f}s after the turn started"
    assert result.prefetch[0].status == "stale"
    assert result.prefetch[0].text == "quick the first time"  # its last answer, still fenced
    assert "quick the first time" in api.bodies[-1]["messages"][-1]["content"][0]["text"]


def test_turns_from_two_threads_are_serialised(home):
    with MessagesAPIServer(default=Reply(text="ok", delay=0.05)) as api:
        agent = Agent(make_host(home), llm_for(api))
        threads = [threading.Thread(target=agent.run_turn, args=(f"q{i}",)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        agent.close()
    roles = [m.role for m in agent.history]
    assert roles == ["user", "assistant"] * 3


def test_hook_order_through_the_sdk(home):
    log = CallLog()
    host = make_host(home, providers=[recorder(log)], engine=engine_class(log))
    with MessagesAPIServer([Reply(text="Hello!", usage={"input_tokens": 50, "output_tokens": 3})]) as api:
        agent = Agent(host, llm_for(api))
        result = agent.run_turn("hi there", on_text=lambda _d: log.add("text"))
        assert agent.worker.flush(2)
        agent.close()
    sid = result.session_id
    turn = [e for e in log.on("turn") if e != "text"]
    assert turn == [f"system_prompt_block {sid}", "on_message user", "should_compress 1 None",
                    "update_from_response 50", "on_message assistant"]
    names = log.names()
    assert names.index("prefetch hi there") < names.index("should_compress 1 None")
    assert names.index("text") < names.index("update_from_response 50")  # streamed before usage
    assert log.on("hermes-memory") == [
        f"on_session_switch None -> {sid} new", "sync_turn hi there -> Hello! (2 messages)",
        "queue_prefetch hi there", f"on_session_end {sid} user_exit (2 messages)",
        "shutdown"]  # shutdown runs on the provider's background lane, after its queued work


def test_budget_notes_reach_the_model_inside_tool_results(home):
    saved: list[str] = []
    host = make_host(home, tools=[note_tool(saved)], config_text="llm:\n  max_iterations: 10\n")
    loop = Reply(tool_calls=[{"name": "note", "input": {"text": "again"}}])
    with MessagesAPIServer(default=loop) as api:
        agent = Agent(host, llm_for(api))
        result = agent.run_turn("keep going")
        agent.close()
        bodies = api.bodies
    assert len(bodies) == 10 and result.budget_exhausted and len(saved) == 9

    def last_result(body):
        return body["messages"][-1]["content"][-1]["content"]

    assert "Budget" not in last_result(bodies[6])  # the results of call 6
    assert "Wrap up" in last_result(bodies[7])  # call 7 is 70 % of 10
    assert "Respond now" in last_result(bodies[9])
    assert all(b["system"] == bodies[0]["system"] for b in bodies)  # notes never touch the prompt
