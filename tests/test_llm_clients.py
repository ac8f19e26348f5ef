"""The ``llm`` plugin kind: registration of model clients, their config sections, and the base
class's defaults. The echo client below is a test double of a model: it fakes only the words."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hermes_core import PluginHost, hookimpl
from hermes_core.config import load_config
from hermes_core.errors import UnknownNameError
from hermes_core.kinds import LLMClient
from hermes_core.llm import ChatLLM, LLMError, LLMFailure, LLMResponse
from hermes_core.models import check_model, context_window
from hermes_core.plugins.llm.anthropic import AnthropicClient, AnthropicSettings
from hermes_core.testing import Failure, MessagesAPIServer
from hermes_core.types import Message, Usage


class EchoClient(LLMClient):
    """Answers with the last user message upper-cased (the words are fake; the kind is real)."""

    name = "echo"
    description = "repeats the last user message"

    class Config(BaseModel):
        window: int = 8_192

    def respond(self, *, system: str, messages: Sequence[Message], max_tokens: int,
                model: str | None = None, timeout: float | None = None,
                tools: Sequence[dict[str, Any]] | None = None,
                on_text: Callable[[str], None] | None = None) -> LLMResponse:
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        return LLMResponse(text=last.upper(), usage=Usage(input_tokens=1, output_tokens=1),
                           stop_reason="end_turn", model=model or self.model)

    def context_window(self, model: str) -> int | None:
        return int(self.config.window)  # type: ignore[attr-defined]


class EchoPlugin:
    @hookimpl
    def register_llm_clients(self, register: Callable[[type], None]) -> None:
        register(EchoClient)


def load(home: Path) -> PluginHost:
    return PluginHost.load(home, builtins=True, entry_points=False, directories=False,
                           plugins=[("echoplugin", EchoPlugin())])


def test_hook_register_llm_clients(home: Path) -> None:
    host = load(home)
    assert "echo" in host.registries.llm_clients.names()
    assert "llm-client:echo" in host.records["echoplugin"].registers
    assert host.records["echoplugin"].kinds == ["llm-client"]
    assert host.registries.by_kind("llm-client") is host.registries.llm_clients


def test_a_client_section_is_validated_by_its_config_model(home: Path) -> None:
    (home / "config.yaml").write_text("echo:\n  window: 2048\n", encoding="utf-8")
    host = load(home)
    config = load_config(home)
    assert host.registries.config_problems(config) == []
    assert host.registries.section_settings("echo", config).window == 2048
    (home / "config.yaml").write_text("echo:\n  window: many\n", encoding="utf-8")
    problems = host.registries.config_problems(load_config(home))
    assert [key for key, _ in problems] == ["echo"]
    assert "window" in problems[0][1]


def test_the_base_class_defaults_and_complete_on_respond() -> None:
    client = EchoClient(EchoClient.Config(), None)  # type: ignore[arg-type]
    assert isinstance(client, ChatLLM)
    assert client.complete(system="", messages=[Message(role="user", content="hi")],
                           max_tokens=10) == "HI"
    with pytest.raises(LLMError) as exc:
        client.complete(system="", messages=[], max_tokens=10)
    assert exc.value.failure is LLMFailure.EMPTY
    assert client.count_tokens(system="", messages=[], tools=None, model="m") is None
    assert client.supports_tools("m") is True and client.context_window("m") == 8_192
    assert LLMClient(None, None).context_window("m") is None  # type: ignore[arg-type]
    client.close()


def test_llm_config_selects_clients_by_name(home: Path) -> None:
    (home / "config.yaml").write_text("llm:\n  client: echo\n  auxiliary_client: anthropic\n",
                                      encoding="utf-8")
    core = load_config(home).core
    assert (core.llm.client, core.llm.auxiliary_client) == ("echo", "anthropic")
    assert load_config(home / "nowhere").core.llm.client == "anthropic"


# ------------------------------------------------------------------ a third-party client in use


class Recording(LLMClient):
    """A third-party echo model that records each call (the words are fake, the path is real)."""

    name = "recording"
    calls: list[tuple[str, str]] = []  # (model, first words of the last user message)

    def respond(self, *, system: str, messages: Sequence[Message], max_tokens: int,
                model: str | None = None, timeout: float | None = None,
                tools: Sequence[dict[str, Any]] | None = None,
                on_text: Callable[[str], None] | None = None) -> LLMResponse:
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        used = model or self.model
        Recording.calls.append((used, last[:40]))
        text = f"echo: {last[:200]}" if "<turns>" not in last else "## Goal\nECHO SUMMARY"
        if on_text is not None:
            on_text(text)
        return LLMResponse(text=text, usage=Usage(input_tokens=len(last) // 4, output_tokens=5),
                           stop_reason="end_turn", model=used)

    def context_window(self, model: str) -> int | None:
        return 50_000


class RecordingPlugin:
    @hookimpl
    def register_llm_clients(self, register: Callable[[type], None]) -> None:
        register(Recording)


def test_a_third_party_client_serves_the_main_and_the_auxiliary_role(home: Path) -> None:
    """``llm.client`` picks the echo model for the turns, ``llm.auxiliary_client`` for the
    compaction summary; nothing asks the anthropic client (there is no key and no server)."""
    from hermes_core.agent import Agent

    Recording.calls = []
    (home / "config.yaml").write_text(
        "llm:\n  client: recording\n  model: echo-main\n  auxiliary_client: recording\n"
        "  auxiliary_model: echo-aux\ncompression:\n  protect_last_n: 2\n"
        "  protect_first_n: 1\n  target_ratio: 0.05\n  prune_only_below: 0\n", encoding="utf-8")
    host = PluginHost.load(home, builtins=True, entry_points=False, directories=False,
                           plugins=[("recording_plugin", RecordingPlugin())])
    agent = Agent.create(host)
    try:
        assert isinstance(agent.llm, Recording) and agent.llm.model == "echo-main"
        assert host.llm("auxiliary").model == "echo-aux"
        assert host.engine.window == 50_000  # the client's window, not a default
        for i in range(6):
            result = agent.run_turn(f"turn {i}: " + "the deploy plan has many steps " * 30)
            assert result.reply.startswith(f"echo: turn {i}")
        record = agent.compact()
        assert record is not None
    finally:
        agent.close()
    models = [m for m, _ in Recording.calls]
    assert models.count("echo-main") == 6
    assert "echo-aux" in models  # the summary went through the auxiliary role
    assert "ECHO SUMMARY" in "\n".join(m.content for m in agent.history)


def test_an_unknown_client_name_lists_the_installed_ones(home: Path) -> None:
    (home / "config.yaml").write_text("llm:\n  client: nosuch\n", encoding="utf-8")
    host = load(home)
    with pytest.raises(UnknownNameError) as exc:
        host.llm("main")
    assert "llm.client: unknown model client 'nosuch'" in str(exc.value)
    assert "anthropic" in str(exc.value) and "echo" in str(exc.value)
    problems = dict(host.registries.config_problems(load_config(home)))
    assert "llm.client=nosuch" in problems and "echo" in problems["llm.client=nosuch"]


def test_config_validate_names_an_unknown_auxiliary_client(home: Path) -> None:
    from click.testing import CliRunner

    from hermes_core.cli import cli

    (home / "config.yaml").write_text("llm:\n  auxiliary_client: nosuch\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["config", "validate"])
    assert result.exit_code == 1, result.output
    assert "llm.auxiliary_client" in result.output and "anthropic" in result.output


# ------------------------------------------------------------------ the anthropic client


def anthropic_client(api: MessagesAPIServer, *, count: bool, key: str | None = "k",
                     max_retries: int = 0) -> AnthropicClient:
    client = AnthropicClient(AnthropicSettings(count_tokens=count), None, api_key=key,
                             base_url=api.base_url, model="claude-test", max_retries=max_retries)
    return client


def test_count_tokens_asks_the_endpoint_once_per_prompt_when_enabled() -> None:
    history = [Message(role="user", content="how big is this prompt? " * 50)]
    with MessagesAPIServer([]) as api:
        client = anthropic_client(api, count=True)
        first = client.count_tokens(system="be brief", messages=history, tools=None, model="m")
        again = client.count_tokens(system="be brief", messages=history, tools=None, model="m")
        paths = [r.path for r in api.requests]
        body = api.requests[0].body
        off = anthropic_client(api, count=False).count_tokens(
            system="", messages=history, tools=None, model="m")
        no_key = anthropic_client(api, count=True, key=None).count_tokens(
            system="", messages=history, tools=None, model="m")
        requests_after = len(api.requests)
    assert first is not None and first > 250 and again == first
    assert paths == ["/v1/messages/count_tokens"]  # cached: one request for two questions
    assert body is not None and body["model"] == "m" and "max_tokens" not in body
    assert off is None and no_key is None and requests_after == 1


def test_a_failing_count_falls_back_to_the_local_estimate() -> None:
    dead = MessagesAPIServer([])
    dead.start()
    url = dead.base_url
    dead.stop()  # nothing listens there any more
    client = AnthropicClient(AnthropicSettings(count_tokens=True, count_tokens_timeout=2), None,
                             api_key="k", base_url=url, model="claude-test")
    assert client.count_tokens(system="", messages=[Message(role="user", content="x")],
                               tools=None, model="m") is None


def test_the_compaction_policy_counts_only_near_the_threshold() -> None:
    from hermes_core.compaction.policy import CompactionPolicy

    asked: list[int] = []

    def counter(messages: list[Message]) -> int | None:
        asked.append(len(messages))
        return 9_000

    policy = CompactionPolicy(window=10_000, threshold=0.5, max_per_turn=3, counter=counter)
    small = [Message(role="user", content="hi")]
    near = [Message(role="user", content="word " * 3_400)]  # ~4,250: 0.8-1.0 of the threshold
    assert policy.should_compress(small, None) is False and asked == []
    assert policy.should_compress(near, None) is True and asked == [1]  # the exact count decides
    assert policy.tokens(near, prompt_tokens=3_000) >= 3_000 and asked == [1]  # fresh usage wins
    usage = Usage(input_tokens=3_000, output_tokens=5)
    policy.record_usage(usage)
    assert policy.last_usage is usage  # what the model reported last


@pytest.mark.parametrize("bounded", [False, True])
def test_a_wrong_key_is_auth_and_never_retried(bounded: bool) -> None:
    with MessagesAPIServer([Failure(401, "invalid x-api-key")] * 3) as api:
        client = anthropic_client(api, count=False, max_retries=2)
        with pytest.raises(LLMError) as exc:
            client.respond(system="", messages=[Message(role="user", content="hi")],
                           max_tokens=10, timeout=20 if bounded else None)
        statuses = [r.status for r in api.requests]
    assert exc.value.failure is LLMFailure.AUTH and exc.value.status == 401
    assert "ANTHROPIC_API_KEY" in str(exc.value) and "auth" in str(exc.value)
    assert statuses == [401]  # one request: no retry storm


def test_a_model_without_tools_is_refused_at_start_naming_client_model_and_fix(home: Path) -> None:
    class NoTools(EchoClient):
        name = "notools"

        def supports_tools(self, model: str) -> bool:
            return False

    class P:
        @hookimpl
        def register_llm_clients(self, register: Callable[[type], None]) -> None:
            register(NoTools)

    (home / "config.yaml").write_text("llm:\n  client: notools\n  model: tiny-1\n",
                                      encoding="utf-8")
    host = PluginHost.load(home, builtins=True, entry_points=False, directories=False,
                           plugins=[("p", P())])
    check = check_model(host)
    assert check.refused is not None
    assert "'tiny-1'" in check.refused and "'notools'" in check.refused
    assert "llm.model" in check.refused
    host.shutdown()


def test_an_unknown_window_is_a_warning_naming_the_setting(home: Path) -> None:
    (home / "config.yaml").write_text("llm:\n  model: mystery-7b\n  api_key: k\n", encoding="utf-8")
    host = load(home)
    check = check_model(host)
    assert check.unavailable is None and check.refused is None
    assert len(check.warnings) == 1 and "llm.context_window" in check.warnings[0]
    assert "'mystery-7b'" in check.warnings[0]
    (home / "config.yaml").write_text("llm:\n  model: claude-sonnet-4-6\n", encoding="utf-8")
    known = check_model(load(home))
    assert known.warnings == [] and known.unavailable and "ANTHROPIC_API_KEY" in known.unavailable
    assert context_window(load_config(home).core, client=AnthropicClient()) == 200_000
    host.shutdown()


def test_the_deprecated_name_still_imports() -> None:
    import hermes_core.llm as llm_module

    with pytest.warns(DeprecationWarning, match="AnthropicClient"):
        old = llm_module.AnthropicLLM
    assert old is AnthropicClient
