"""The ``anthropic`` model client: Anthropic's Messages API through the official SDK.

Selected by ``llm.client: anthropic`` (the default). It reads the client-neutral ``llm.*``
settings plus ``llm.base_url`` / ``llm.api_key`` (``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``),
and its own section ``anthropic:`` (``count_tokens``). See docs/models.md.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_core import hookimpl

from .client import AnthropicClient, AnthropicSettings, classify_exception

__all__ = ["AnthropicClient", "AnthropicLLM", "AnthropicSettings", "classify_exception"]

#: the name this client had when the kernel built it itself
AnthropicLLM = AnthropicClient


@hookimpl
def register_llm_clients(register: Callable[[type], None]) -> None:
    register(AnthropicClient)
