"""Shared helpers for the context-engine tests: built conversations and a fake summariser.

Only the LLM's words are fake (:class:`ScriptedLLM`); everything else is the real engine.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from hermes_core.config import CoreConfig, LLMSection
from hermes_core.kinds import PluginContext
from hermes_core.llm import LLMError, LLMFailure, build_llm
from hermes_core.plugins.llm.anthropic import AnthropicClient
from hermes_core.registry import Registries
from hermes_core.types import Message, ToolCall

__all__ = ["ScriptedLLM", "build_history", "make_context"]

_TOOLS = ("read_file", "terminal", "write_file", "search_files")
_WORDS = [
    "parser", "cache", "index", "migration", "schema", "handler", "retry", "timeout", "config",
    "deploy", "build", "test", "fixture", "module", "import", "latency", "queue", "worker",
    "session", "budget", "summary", "archive",
]


def make_context(home: Path, *, window: int | None = None, **llm: Any) -> PluginContext:
    """A context whose ``llm(role)`` builds the anthropic client from ``llm.*`` as a host would
    (through :func:`hermes_core.llm.build_llm`)."""
    core = CoreConfig(llm=LLMSection(context_window=window, **llm))
    registries = Registries()
    registries.llm_clients.add(AnthropicClient, "anthropic")
    return PluginContext(
        plugin_name="test", home=home, config=core, logger=logging.getLogger("test.context"),
        llm=lambda role: build_llm(registries, core, role, home=home),
    )


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def build_history(
    turns: int,
    *,
    seed: int = 7,
    tool_output_chars: int = 1_500,
    max_tools: int = 3,
) -> list[Message]:
    """A conversation of ``turns`` user turns; each has 0..max_tools tool calls and an answer."""
    rng = random.Random(seed)
    out: list[Message] = []
    call_no = 0
    for turn in range(turns):
        out.append(Message("user", f"request {turn}: please handle the {_text(rng, 12)}"))
        for _ in range(rng.randint(0, max_tools)):
            call_no += 1
            name = rng.choice(_TOOLS)
            call_id = f"call_{call_no}"
            args = {"path": f"src/module_{rng.randint(1, 40)}.py"}
            if name == "terminal":
                args = {"command": f"pytest -q tests/test_{rng.randint(1, 30)}.py"}
            out.append(
                Message("assistant", f"step {call_no}", tool_calls=[ToolCall(call_id, name, args)])
            )
            body = _text(rng, tool_output_chars // 7)
            if rng.random() < 0.1:
                body += "\nError: assertion failed in test_case"
            out.append(Message("tool", body, tool_call_id=call_id, tool_name=name))
        out.append(Message("assistant", f"answer {turn}: done with the {_text(rng, 20)}"))
    return out


class ScriptedLLM:
    """A summariser whose words are scripted; records every call. Items may be exceptions."""

    def __init__(self, *answers: str | BaseException, default: str | None = None) -> None:
        self.answers = list(answers)
        self.default = default
        self.calls: list[dict[str, Any]] = []

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
    ) -> str:
        self.calls.append(
            {"system": system, "prompt": messages[-1].content, "max_tokens": max_tokens, "model": model}
        )
        item: str | BaseException | None = self.answers.pop(0) if self.answers else self.default
        if item is None:
            raise LLMError("ScriptedLLM has no answer left", failure=LLMFailure.OTHER)
        if isinstance(item, BaseException):
            raise item
        return item
