"""Stand-in for ``agent.plugin_llm``: the shapes of ``ctx.llm`` (Hermes Agent 0.19.0).

A plugin builds structured inputs from :class:`PluginLlmTextInput` / :class:`PluginLlmImageInput`
(or plain dicts), reads :class:`PluginLlmCompleteResult` / :class:`PluginLlmStructuredResult` and
catches :class:`PluginLlmTrustError`. The facade itself (``ctx.llm``) is the bridge's
(``hermes_core_hermes_compat.plugin_llm``): it runs on hermes-core's model client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PluginLlmCompleteResult", "PluginLlmImageInput", "PluginLlmInput",
           "PluginLlmStructuredResult", "PluginLlmTextInput", "PluginLlmTrustError",
           "PluginLlmUsage"]


@dataclass
class PluginLlmTextInput:
    text: str
    type: str = "text"


@dataclass
class PluginLlmImageInput:
    data: bytes | None = None
    url: str | None = None
    mime_type: str = "image/png"
    file_name: str = ""
    type: str = "image"


PluginLlmInput = PluginLlmTextInput | PluginLlmImageInput | dict[str, Any]


@dataclass
class PluginLlmUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class PluginLlmCompleteResult:
    text: str
    provider: str
    model: str
    agent_id: str
    usage: PluginLlmUsage = field(default_factory=PluginLlmUsage)
    audit: dict[str, Any] = field(default_factory=dict)


@dataclass
class PluginLlmStructuredResult:
    text: str
    provider: str
    model: str
    agent_id: str
    usage: PluginLlmUsage = field(default_factory=PluginLlmUsage)
    parsed: Any | None = None
    content_type: str = "text"
    audit: dict[str, Any] = field(default_factory=dict)


class PluginLlmTrustError(PermissionError):
    """A plugin asked for a provider, model, agent or auth profile of its own without trust."""
