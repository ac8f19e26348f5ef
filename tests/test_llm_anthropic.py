"""AnthropicLLM: message conversion, prompt-cache breakpoints, failure classes.

The requests are sent by the real anthropic SDK to the loopback Messages API server; only the
model's answers are scripted.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hermes_core.config import CoreConfig, LLMSection
from hermes_core.llm import (
    LLM,
    LLMError,
    LLMFailure,
    apply_cache_breakpoints,
    build_request,
    to_anthropic_messages,
)
from hermes_core.models import DEFAULT_CONTEXT_WINDOW, context_window, lookup_context_window, window_source
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.testing import Failure, MessagesAPIServer, Reply
from hermes_core.types import Message, ToolCall

MODEL = "claude-test"


def tool_turns(n: int) -> list[Message]:
    """user, then n x (assistant tool call, tool result), then a final assistant answer."""
    out = [Message("user", "fix the build")]
    for i in range(n):
        out.append(Message("assistant", f"step {i}", tool_calls=[ToolCall(f"t{i}", "run", {"i": i})]))
        out.append(Message("tool", f"output {i}", tool_call_id=f"t{i}", tool_name="run"))
    out.append(Message("assistant", "done"))
    out.append(Message("user", "thanks, now the docs"))
    return out


def llm_for(api: MessagesAPIServer, **kw: object) -> AnthropicLLM:
    return AnthropicLLM(api_key="k", base_url=api.base_url, model=MODEL, max_retries=0, **kw)


def marked(blocks: list[dict]) -> list[bool]:
    return ["cache_control" in b for b in blocks]


# ------------------------------------------------------------------------------ conversion


def test_conversion_tool_calls_results_and_merging() -> None:
    history = [
        Message("user", "hi"),
        Message("assistant", "", tool_calls=[ToolCall("a", "read", {"p": 1}), ToolCall("b", "ls", {})]),
        Message("tool", "r1", tool_call_id="a"),
        Message("tool", "", tool_call_id="b", meta={"is_error": True}),
        Message("user", "and?"),
        Message("assistant", "ok"),
    ]
    api = to_anthropic_messages(history)
    assert [m["role"] for m in api] == ["user", "assistant", "user", "assistant"]
    assert api[1]["content"] == [
        {"type": "tool_use", "id": "a", "name": "read", "input": {"p": 1}},
        {"type": "tool_use", "id": "b", "name": "ls", "input": {}},
    ]
    # both results and the follow-up text travel in one user turn, results first
    assert [b["type"] for b in api[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert api[2]["content"][1] == {
        "type": "tool_result", "tool_use_id": "b", "content": "(empty result)", "is_error": True,
    }


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([Message("system", "x")], "pass the system prompt"),
        ([Message("tool", "x")], "tool_call_id"),
    ],
)
def test_conversion_refuses_what_cannot_be_sent(messages: list[Message], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        to_anthropic_messages(messages)


def test_breakpoints_system_and_last_three_without_touching_inputs() -> None:
    api = to_anthropic_messages(tool_turns(3))
    before = repr(api)
    system, out = apply_cache_breakpoints("You are terse.", api, "5m")
    assert repr(api) == before  # inputs untouched
    assert system == [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    flags = [any(marked(m["content"])) for m in out]
    assert flags == [False] * (len(out) - 3) + [True] * 3
    assert all(marked(m["content"])[-1] for m in out[-3:])  # on the last block of each
    _, out_1h = apply_cache_breakpoints("s", api, "1h")
    assert out_1h[-1]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


def test_breakpoints_without_system_use_four_messages() -> None:
    system, out = apply_cache_breakpoints(None, to_anthropic_messages(tool_turns(3)), "5m")
    assert system is None
    assert sum(any(marked(m["content"])) for m in out) == 4


def test_bad_ttl_is_refused() -> None:
    with pytest.raises(ValueError, match="'5m' or '1h'"):
        apply_cache_breakpoints("s", [], "10m")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- over the wire


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_sdk_request_carries_system_and_3_breakpoints(ttl: str) -> None:
    with MessagesAPIServer(["fine"]) as api:
        llm = llm_for(api, cache_ttl=ttl)
        assert llm.complete(system="SYSTEM PROMPT", messages=tool_turns(4), max_tokens=64) == "fine"
    body = api.bodies[0]
    expected = {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "SYSTEM PROMPT", "cache_control": expected}]
    positions = [i for i, m in enumerate(body["messages"]) if any(marked(m["content"]))]
    n = len(body["messages"])
    assert positions == [n - 3, n - 2, n - 1]
    for i in positions:
        assert body["messages"][i]["content"][-1]["cache_control"] == expected
    total = sum(sum(marked(m["content"])) for m in body["messages"]) + 1
    assert total == 4


def test_system_prompt_bytes_identical_across_calls() -> None:
    history = tool_turns(2)
    with MessagesAPIServer(default="ok") as api:
        llm = llm_for(api)
        llm.complete(system="S" * 500, messages=history, max_tokens=10)
        llm.complete(system="S" * 500, messages=[*history, Message("assistant", "x"), Message("user", "y")],
                     max_tokens=10)
    first, second = api.bodies
    assert first["system"] == second["system"]
    # the prefix shared by the two calls is byte-identical apart from moved breakpoints
    strip = [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
             for m in first["messages"]]
    again = [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
             for m in second["messages"][: len(strip)]]
    assert strip == again


def test_respond_returns_tool_calls_usage_and_streams() -> None:
    reply = Reply(text="checking", tool_calls=[{"name": "read", "input": {"path": "x"}, "id": "tu1"}],
                  usage={"input_tokens": 120, "output_tokens": 7, "cache_read_input_tokens": 100})
    with MessagesAPIServer([reply, reply]) as api:
        llm = llm_for(api)
        plain = llm.respond(system="s", messages=[Message("user", "go")], max_tokens=20)
        deltas: list[str] = []
        streamed = llm.respond(system="s", messages=[Message("user", "go")], max_tokens=20,
                               on_text=deltas.append)
    for response in (plain, streamed):
        assert response.text == "checking"
        assert response.tool_calls == [ToolCall("tu1", "read", {"path": "x"})]
        assert response.stop_reason == "tool_use"
    assert plain.usage.input_tokens == 120 and plain.usage.cache_read_tokens == 100
    assert plain.usage.prompt_tokens == 220
    assert "".join(deltas) == "checking"
    assert plain.as_message().tool_calls[0].name == "read"


@pytest.mark.parametrize(
    ("item", "failure", "status"),
    [
        (Failure(429), LLMFailure.RATE_LIMITED, 429),
        (Failure(500), LLMFailure.SERVER_ERROR, 500),
        (Failure(503), LLMFailure.SERVER_ERROR, 503),
        (Failure(529), LLMFailure.OVERLOADED, 529),
        (Failure(401), LLMFailure.AUTH, 401),
        (Failure(403), LLMFailure.AUTH, 403),
        (Failure(400, "bad"), LLMFailure.BAD_REQUEST, 400),
        (Reply(), LLMFailure.EMPTY, None),
        (Reply(text="   \n"), LLMFailure.EMPTY, None),
    ],
)
def test_failures_are_classified_by_type_and_status(
    item: Failure | Reply, failure: LLMFailure, status: int | None
) -> None:
    with MessagesAPIServer([item]) as api, pytest.raises(LLMError) as info:
        llm_for(api).complete(system="s", messages=[Message("user", "x")], max_tokens=10)
    assert info.value.failure == failure
    assert info.value.status == status
    assert info.value.transient == (failure in {LLMFailure.RATE_LIMITED, LLMFailure.SERVER_ERROR,
                                                LLMFailure.OVERLOADED, LLMFailure.EMPTY})


def test_timeout_and_connection_failures() -> None:
    with MessagesAPIServer([Reply(text="late", delay=2)]) as api:
        started = time.perf_counter()
        with pytest.raises(LLMError) as info:
            llm_for(api).complete(system="s", messages=[Message("user", "x")], max_tokens=10, timeout=0.3)
        assert time.perf_counter() - started < 1.5
    assert info.value.failure == LLMFailure.TIMEOUT
    with MessagesAPIServer() as api:
        dead = api.base_url
    with pytest.raises(LLMError) as info:
        AnthropicLLM(api_key="k", base_url=dead, model=MODEL, max_retries=0).complete(
            system="s", messages=[Message("user", "x")], max_tokens=10)
    assert info.value.failure == LLMFailure.CONNECTION


def test_sdk_retries_transient_failures() -> None:
    with MessagesAPIServer([Failure(429), Failure(529), "third time"]) as api:
        llm = AnthropicLLM(api_key="k", base_url=api.base_url, model=MODEL, max_retries=2)
        assert llm.complete(system="s", messages=[Message("user", "x")], max_tokens=10) == "third time"
    assert len(api.requests) == 3


def test_no_key_is_not_configured_and_from_config() -> None:
    with pytest.raises(LLMError) as info:
        AnthropicLLM(api_key=None).complete(system="s", messages=[Message("user", "x")], max_tokens=5)
    assert info.value.failure == LLMFailure.NOT_CONFIGURED
    assert "ANTHROPIC_API_KEY" in str(info.value)
    core = CoreConfig(llm=LLMSection(api_key="sk-x", base_url="http://127.0.0.1:9", cache_ttl="1h",
                                     max_retries=0, model="claude-opus-4-1"))
    llm = AnthropicLLM.from_config(core, model="claude-haiku-4-5")
    assert (llm.api_key, llm.model, llm.cache_ttl, llm.max_retries) == ("sk-x", "claude-haiku-4-5", "1h", 0)
    assert isinstance(llm, LLM)


def test_build_request_shape() -> None:
    req = build_request(system="", messages=[Message("user", "hi")], model="m", max_tokens=5,
                        tools=[{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
                        cache_ttl=None)
    assert req == {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi"}]}], "tools": [{"name": "t", "description": "d",
                                                      "input_schema": {"type": "object"}}]}
    with pytest.raises(ValueError, match="max_tokens"):
        build_request(system="", messages=[Message("user", "hi")], model="m", max_tokens=0)


# ---------------------------------------------------------------------------------- windows


def test_context_windows(tmp_path: Path) -> None:
    assert lookup_context_window("claude-sonnet-4-5-20250929") == 200_000
    assert lookup_context_window("anthropic/claude-3-5-haiku-latest") == 200_000
    assert lookup_context_window("claude-2.0") == 100_000
    assert lookup_context_window("gpt-oss") is None
    assert context_window(CoreConfig(llm=LLMSection(model="mystery"))) == DEFAULT_CONTEXT_WINDOW
    assert window_source(CoreConfig(llm=LLMSection(model="mystery"))) == "default"
    core = CoreConfig(llm=LLMSection(model="claude-opus-4-1", context_window=64_000))
    assert context_window(core) == 64_000 and window_source(core) == "config"
    # an explicitly named other model is looked up on its own
    assert context_window(core, model="claude-2.0") == 100_000
