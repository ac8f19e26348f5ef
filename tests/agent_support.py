"""Helpers for the agent-loop tests: a host built from classes defined inside each test.

Nothing here is a fake of hermes-core: hosts are real PluginHosts with a real pluggy manager, and
the classes the tests pass are throwaway plugins. The only fakes are LLM words (ScriptLLM below and
the loopback Messages API server's scripts).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hermes_core import CompressionResult, ContextEngine, MemoryProvider, PluginHost, Tool, hookimpl
from hermes_core.config import parse_config_text
from hermes_core.llm import LLMResponse
from hermes_core.plugins.llm.anthropic import AnthropicClient
from hermes_core.types import Message, ToolCall, Usage

__all__ = ["CallLog", "ScriptLLM", "engine_class", "make_host", "recorder", "reply", "tool_reply"]


class CallLog:
    """A thread-safe list of (thread kind, event) pairs, shared by a test's plugins."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []

    def add(self, event: str) -> None:
        # Hooks run on their plugin's lane: "turn" lanes on behalf of the turn, "background"
        # lanes on behalf of the memory worker.
        name = threading.current_thread().name
        if threading.current_thread() is threading.main_thread() or name.startswith("hermes-lane-turn-"):
            kind = "turn"
        elif name.startswith("hermes-lane-background-"):
            kind = "hermes-memory (lane)"
        else:
            kind = name
        with self.lock:
            self.events.append((kind, event))

    def names(self) -> list[str]:
        with self.lock:
            return [event for _kind, event in self.events]

    def on(self, prefix: str) -> list[str]:
        """Events whose thread name starts with ``prefix`` (``turn`` for the test's thread)."""
        with self.lock:
            return [e for k, e in self.events if k.startswith(prefix)]


def make_host(
    home: Path,
    *,
    providers: Sequence[type[MemoryProvider]] = (),
    engine: type[ContextEngine] | None = None,
    tools: Sequence[Tool] = (),
    config_text: str = "",
    extra_plugins: Sequence[tuple[str, object]] = (),
    host_cls: type[PluginHost] = PluginHost,
    activate: bool = True,
) -> PluginHost:
    """A host whose only plugins are the given classes, all activated in order."""
    provider_names = [cls.name for cls in providers]
    names = ", ".join(provider_names)
    engine_name = engine.name if engine is not None else "none"
    text = f"memory:\n  providers: [{names}]\ncontext:\n  engine: {engine_name}\n" + config_text
    config = parse_config_text(text, home / "config.yaml")

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register: Callable[[type], None]) -> None:
            for cls in providers:
                register(cls)

        @hookimpl
        def register_context_engines(self, register: Callable[[type], None]) -> None:
            if engine is not None:
                register(engine)

        @hookimpl
        def register_tools(self, register: Callable[[Tool], None]) -> None:
            for tool in tools:
                register(tool)

        @hookimpl
        def register_llm_clients(self, register: Callable[[type], None]) -> None:
            register(AnthropicClient)  # the auxiliary model of reviews and flushes

    host = host_cls.load(
        home, config=config, builtins=False, entry_points=False, directories=False,
        plugins=[("test_plugins", Registrar()), *extra_plugins],
    )
    if not activate:
        return host
    host.activate_memory_providers()
    if engine is not None:
        host.activate("context-engine", engine.name, config_key="context.engine")
    return host


def reply(text: str, usage: Usage | None = None) -> LLMResponse:
    return LLMResponse(text=text, usage=usage or Usage(input_tokens=100, output_tokens=10),
                       stop_reason="end_turn")


def tool_reply(*calls: tuple[str, dict[str, Any]], text: str = "") -> LLMResponse:
    return LLMResponse(
        text=text,
        tool_calls=[ToolCall(id=f"call_{i}_{name}", name=name, arguments=args)
                    for i, (name, args) in enumerate(calls)],
        usage=Usage(input_tokens=100, output_tokens=10),
        stop_reason="tool_use",
    )


class ScriptLLM:
    """An in-process LLM whose words come from a list (the only fake in the agent tests)."""

    def __init__(self, script: Sequence[LLMResponse] | Callable[[list[Message]], LLMResponse]):
        self._script = script if callable(script) else list(script)
        self.calls: list[dict[str, Any]] = []

    def respond(self, *, system: str, messages: Sequence[Message], max_tokens: int,
                model: str | None = None, timeout: float | None = None,
                tools: Sequence[dict[str, Any]] | None = None,
                on_text: Callable[[str], None] | None = None) -> LLMResponse:
        self.calls.append({"system": system, "messages": list(messages), "tools": tools})
        if callable(self._script):
            response = self._script(list(messages))
        else:
            if not self._script:
                raise AssertionError("ScriptLLM: the script is exhausted")
            response = self._script.pop(0)
        if on_text is not None and response.text:
            for i in range(0, len(response.text), 7):
                on_text(response.text[i:i + 7])
        return response

    def complete(self, *, system: str, messages: list[Message], max_tokens: int,
                 model: str | None = None, timeout: float | None = None) -> str:
        return self.respond(system=system, messages=messages, max_tokens=max_tokens).text


# --------------------------------------------------------------------------------------------------
# Throwaway plugins that record what the kernel calls
# --------------------------------------------------------------------------------------------------


def recorder(log: CallLog, name: str = "rec", recall: str | None = "likes green tea"):
    class Recorder(MemoryProvider):
        @hookimpl
        def system_prompt_block(self, session):
            log.add(f"system_prompt_block {session.id}")
            return f"{name} frozen block"

        @hookimpl
        def on_message(self, message, session):
            log.add(f"on_message {message.role}")

        @hookimpl
        def prefetch(self, query, session):
            log.add(f"prefetch {query}")
            return recall

        @hookimpl
        def queue_prefetch(self, query, session):
            log.add(f"queue_prefetch {query}")

        @hookimpl
        def sync_turn(self, user_message, assistant_message, session, messages):
            log.add(f"sync_turn {user_message.content} -> {assistant_message.content} "
                    f"({len(messages)} messages)")

        @hookimpl
        def on_session_switch(self, new_session, old_session, reason):
            log.add(f"on_session_switch {old_session.id if old_session else None} -> "
                    f"{new_session.id} {reason}")

        @hookimpl
        def on_session_end(self, session, messages, reason):
            log.add(f"on_session_end {session.id} {reason} ({len(messages)} messages)")

        @hookimpl
        def shutdown(self):
            log.add("shutdown")

    Recorder.name = name
    return Recorder


def engine_class(log: CallLog, *, compress_when=lambda messages: False, keep=2):
    class Engine(ContextEngine):
        name = "test_engine"

        @hookimpl
        def should_compress(self, messages, prompt_tokens):
            log.add(f"should_compress {len(messages)} {prompt_tokens}")
            return compress_when(messages)

        @hookimpl
        def compress(self, messages, focus_topic, memory_context):
            log.add(f"compress {len(messages)} focus={focus_topic} memory={memory_context!r}")
            summary = Message("user", f"[summary of {len(messages) - keep} messages]")
            tail = messages[-keep:]
            if tail and tail[0].role == "user":  # merge, so two user turns never follow each other
                tail = [Message("user", summary.content + "\n\n" + tail[0].content), *tail[1:]]
                return CompressionResult(messages=tail, summary="S", notices=["test notice"])
            return CompressionResult(messages=[summary, *tail], summary="S")

        @hookimpl
        def update_from_response(self, usage):
            log.add(f"update_from_response {usage.prompt_tokens}")

    return Engine
