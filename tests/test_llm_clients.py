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
from hermes_core.kinds import LLMClient
from hermes_core.llm import ChatLLM, LLMError, LLMFailure, LLMResponse
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
