"""The ``openai`` model client through the real openai SDK against the loopback OpenAI-compatible
server (hermes_core.testing.OpenAIAPIServer: a real HTTP server on 127.0.0.1; only the model's
words come from its script)."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from openai_support import client_config, openai_client

from hermes_core import PluginHost
from hermes_core.config import parse_config_text
from hermes_core.llm import ChatLLM, LLMError, LLMFailure
from hermes_core.plugins.llm.openai import INSTALL, OpenAIClient
from hermes_core.testing import Broken, Failure, OpenAIAPIServer, Reply
from hermes_core.types import Message, ToolCall

NOTE = {"name": "note", "description": "Save a note.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                         "required": ["text"]}}


def history() -> list[Message]:
    """A conversation with two parallel tool calls and their results."""
    return [
        Message("user", "Remember cat Miso and tea."),
        Message("assistant", "Saving.", tool_calls=[
            ToolCall("call_a", "note", {"text": "cat: Miso"}),
            ToolCall("call_b", "note", {"text": "likes tea"})]),
        Message("tool", '{"saved": "cat: Miso"}', tool_call_id="call_a", tool_name="note"),
        Message("tool", '{"saved": "likes tea"}', tool_call_id="call_b", tool_name="note"),
        Message("user", "Thanks."),
    ]


def test_history_and_tools_convert_to_chat_completions_and_back(home):
    reply = Reply(text="Both saved.", tool_calls=[
        {"name": "note", "input": {"text": "one"}}, {"name": "note", "input": {"text": "two"}}],
        usage={"prompt_tokens": 120, "completion_tokens": 7,
               "prompt_tokens_details": {"cached_tokens": 100}})
    with OpenAIAPIServer([reply]) as api:
        client = openai_client(home, api)
        assert isinstance(client, ChatLLM)
        response = client.respond(system="Be brief.", messages=history(), max_tokens=50,
                                  tools=[NOTE])
        body = api.bodies[0]
    assert body["model"] == "gpt-test" and body["max_tokens"] == 50 and "stream" not in body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assistant = body["messages"][2]
    assert [c["function"] for c in assistant["tool_calls"]] == [
        {"name": "note", "arguments": '{"text": "cat: Miso"}'},
        {"name": "note", "arguments": '{"text": "likes tea"}'}]
    assert [(m["role"], m.get("tool_call_id")) for m in body["messages"][3:]] == [
        ("tool", "call_a"), ("tool", "call_b"), ("user", None)]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "note", "description": "Save a note.", "parameters": NOTE["input_schema"]}}]
    # back: parallel calls in the model's order, usage split into fresh and cached input
    assert response.text == "Both saved."
    assert [(c.name, c.arguments, c.error) for c in response.tool_calls] == [
        ("note", {"text": "one"}, None), ("note", {"text": "two"}, None)]
    assert response.stop_reason == "tool_use"
    usage = response.usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (20, 100, 7)
    assert usage.prompt_tokens == 120


def test_streaming_delivers_deltas_and_assembles_interleaved_tool_calls(home):
    reply = Reply(text="Saving both now.", chunk_size=3, tool_calls=[
        {"name": "note", "input": {"text": "a fairly long first note"}},
        {"name": "note", "input": {"text": "second"}}],
        usage={"prompt_tokens": 40, "completion_tokens": 12})
    with OpenAIAPIServer([reply]) as api:
        client = openai_client(home, api)
        deltas: list[str] = []
        response = client.respond(system="", messages=[Message("user", "go")], max_tokens=50,
                                  tools=[NOTE], on_text=deltas.append)
        body = api.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert len(deltas) > 3 and "".join(deltas) == "Saving both now."
    assert [c.arguments for c in response.tool_calls] == [
        {"text": "a fairly long first note"}, {"text": "second"}]
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 12)
    assert response.stop_reason == "tool_use" and response.model == "gpt-test"


def test_broken_tool_call_json_becomes_an_error_the_model_reads(home):
    bad = Reply(tool_calls=[{"name": "note", "arguments": '{"text": "unterminated'},
                            {"name": "note", "arguments": "[1, 2]"},
                            {"name": "note", "input": {"text": "fine"}}])
    with OpenAIAPIServer([bad, bad]) as api:
        client = openai_client(home, api)
        for on_text in (None, lambda _d: None):  # JSON and streamed answers alike
            calls = client.respond(system="", messages=[Message("user", "go")], max_tokens=50,
                                   tools=[NOTE], on_text=on_text).tool_calls
            assert [c.arguments for c in calls] == [{}, {}, {"text": "fine"}]
            assert "not valid JSON" in calls[0].error and "call it again" in calls[0].error
            assert "JSON list, not an object" in calls[1].error
            assert calls[2].error is None


def test_an_unknown_finish_reason_keeps_the_answer_and_warns(home, caplog):
    with OpenAIAPIServer([Reply(text="partial", stop_reason="eos_token_weird")]) as api:
        client = openai_client(home, api)
        with caplog.at_level(logging.WARNING, logger="hermes_core.plugins.llm.openai"):
            response = client.respond(system="", messages=[Message("user", "go")], max_tokens=9)
    assert response.text == "partial" and response.stop_reason == "eos_token_weird"
    assert "finish_reason 'eos_token_weird'" in caplog.text and "gpt-test" in caplog.text


@pytest.mark.parametrize("timeout", [None, 10.0])
def test_a_wrong_key_is_auth_after_one_request(home, timeout):
    with OpenAIAPIServer([Failure(401, "Incorrect API key provided")], default="never") as api:
        client = openai_client(home, api, openai_extra="  api_key: sk-wrong\n",
                               llm_extra="  max_retries: 3\n")
        with pytest.raises(LLMError) as err:
            client.respond(system="", messages=[Message("user", "hi")], max_tokens=9,
                           timeout=timeout)
        statuses = [r.status for r in api.requests]
    assert err.value.failure is LLMFailure.AUTH and err.value.status == 401
    assert statuses == [401]  # never retried
    assert "openai client" in str(err.value) and "gpt-test" in str(err.value)
    assert "sk-wrong" not in str(err.value)


def test_transient_failures_are_retried_by_the_sdk_and_within_a_deadline(home):
    with OpenAIAPIServer([Failure(429), Failure(500), "ok", Failure(503), "fine"]) as api:
        client = openai_client(home, api, llm_extra="  max_retries: 2\n")
        assert client.complete(system="", messages=[Message("user", "a")], max_tokens=5) == "ok"
        assert client.complete(system="", messages=[Message("user", "b")], max_tokens=5,
                               timeout=10) == "fine"
        assert [r.status for r in api.requests] == [429, 500, 200, 503, 200]


def test_a_hung_server_costs_at_most_the_deadline(home):
    with OpenAIAPIServer(default=Reply(text="late", delay=30)) as api:
        client = openai_client(home, api, llm_extra="  max_retries: 3\n")
        with pytest.raises(LLMError) as err:
            client.respond(system="", messages=[Message("user", "a")], max_tokens=5, timeout=0.5)
    assert err.value.failure is LLMFailure.TIMEOUT


def test_a_model_without_tools_is_named_with_the_fix(home):
    with OpenAIAPIServer(["no tools here"], tools_supported=False) as api:
        client = openai_client(home, api)
        with pytest.raises(LLMError) as err:
            client.respond(system="", messages=[Message("user", "a")], max_tokens=5, tools=[NOTE])
        assert err.value.failure is LLMFailure.BAD_REQUEST and api.requests[0].status == 400
        message = str(err.value)
        assert "gpt-test does not support tools" in message
        assert "openai.models_without_tools" in message and "openai client" in message
        # listed there, the model is asked without tools
        client = openai_client(home, api, openai_extra="  models_without_tools: [gpt-test]\n")
        assert not client.supports_tools("gpt-test") and client.supports_tools("other")
        response = client.respond(system="", messages=[Message("user", "a")], max_tokens=5,
                                  tools=[NOTE])
        assert response.text == "no tools here" and "tools" not in api.bodies[-1]


def test_headers_base_url_and_keys(home, monkeypatch):
    headers = "  headers:\n    HTTP-Referer: https://example.org/app\n    X-Title: Hermes test\n"
    with OpenAIAPIServer(default="hi") as api:
        client = openai_client(home, api, openai_extra=headers)
        client.complete(system="", messages=[Message("user", "a")], max_tokens=5)
        sent = api.requests[-1].headers
        assert sent["http-referer"] == "https://example.org/app" and sent["x-title"] == "Hermes test"
        assert sent["authorization"] == "Bearer no-key"  # api_key_env: null
        # a key from the named variable
        monkeypatch.setenv("MY_GATEWAY_KEY", "sk-from-env")
        client = openai_client(home, api, openai_extra="  api_key_env: MY_GATEWAY_KEY\n")
        client.complete(system="", messages=[Message("user", "a")], max_tokens=5)
        assert api.requests[-1].headers["authorization"] == "Bearer sk-from-env"
        # the variable unset: no request, the variable named
        monkeypatch.delenv("MY_GATEWAY_KEY")
        client = openai_client(home, api, openai_extra="  api_key_env: MY_GATEWAY_KEY\n")
        before = len(api.requests)
        with pytest.raises(LLMError) as err:
            client.complete(system="", messages=[Message("user", "a")], max_tokens=5)
        assert err.value.failure is LLMFailure.NOT_CONFIGURED and len(api.requests) == before
        assert "MY_GATEWAY_KEY" in str(err.value) and "api_key_env: null" in str(err.value)


def test_context_window_from_config_then_listing_else_none(home):
    with OpenAIAPIServer(model="served-model", max_model_len=32_768) as api:
        client = openai_client(home, api, openai_extra="  context_windows:\n    small: 4096\n",
                               llm_extra="  context_window: 100000\n")
        assert client.context_window("small") == 4096  # openai.context_windows
        assert client.context_window("gpt-test") == 100_000  # llm.context_window, llm.model
        assert client.context_window("served-model") == 32_768  # vLLM's max_model_len
        assert client.context_window("unknown") is None  # never a silent default
        listings = [r for r in api.requests if r.path == "/v1/models"]
        assert len(listings) == 1  # listed once, then cached
    with OpenAIAPIServer(model="plain") as api:  # a listing without a window (OpenAI, Ollama)
        assert openai_client(home, api).context_window("plain") is None
    # no server at all: still None, not an exception
    assert openai_client(home, None, openai_extra="  base_url: http://127.0.0.1:9/v1\n"
                         ).context_window("gpt-test") is None


def test_without_the_sdk_selecting_the_client_names_the_install_command(home, monkeypatch):
    from hermes_core.errors import HermesCoreError
    from hermes_core.models import check_model

    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` now fails
    config = parse_config_text(client_config(None), home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=True, entry_points=False,
                           directories=False)
    assert "openai" in host.registries.llm_clients.names()  # still registered, still listed
    with pytest.raises(HermesCoreError) as err:
        check_model(host, "main")  # what chat and serve do before they start
    assert isinstance(err.value, LLMError) and err.value.failure is LLMFailure.NOT_CONFIGURED
    assert str(err.value) == ("llm.client is 'openai', but the openai package is not installed: "
                              "pip install 'hermes-core-kernel[openai]'") and INSTALL in str(err.value)


def test_selection_sets_the_model_per_role_and_a_missing_key_is_reported(home, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = ("llm:\n  client: openai\n  model: big-model\n  auxiliary_model: small-model\n"
            "openai:\n  context_windows: {big-model: 65536}\n")
    host = PluginHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                           builtins=True, entry_points=False, directories=False)
    main, aux = host.llm("main"), host.llm("auxiliary")
    assert isinstance(main, OpenAIClient) and isinstance(aux, OpenAIClient)
    assert (main.model, aux.model) == ("big-model", "small-model")
    assert "export OPENAI_API_KEY=" in (main.unavailable() or "")
    assert main.context_window("big-model") == 65536


def test_a_stream_cut_mid_answer_is_a_transient_failure(home):
    with OpenAIAPIServer([Broken("reset")]) as api:
        client = openai_client(home, api)
        with pytest.raises(LLMError) as err:
            client.respond(system="", messages=[Message("user", "a")], max_tokens=5,
                           on_text=lambda _d: None)
    assert err.value.transient


def test_tool_results_answer_calls_of_the_turn_before(home):
    """The strict server rejects a tool message that answers no call: the conversion keeps
    each result right after its assistant message."""
    with OpenAIAPIServer(["ok"]) as api:
        client = openai_client(home, api)
        client.respond(system="", messages=history(), max_tokens=5)
        roles = [m["role"] for m in api.bodies[0]["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    assert json.loads(api.bodies[0]["messages"][1]["tool_calls"][1]["function"]["arguments"]) == {
        "text": "likes tea"}
