"""hermes-core: a plugin kernel for LLM agents' memory and context.

The public surface is listed in ``__all__``. Attributes load on first use, so ``import hermes_core``
stays cheap (the CLI's ``--help`` and ``--version`` never pay for pydantic or the plugins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._markers import hookimpl
from ._version import __version__

if TYPE_CHECKING:
    from .agent import Agent
    from .errors import (
        ConfigError,
        HermesCoreError,
        PluginError,
        PluginLoadError,
        RegistryError,
        ToolError,
        UnknownNameError,
    )
    from .host import HookOutcome, PluginHost, create_plugin_manager
    from .kinds import ContextEngine, MemoryProvider, NoConfig, Platform, PluginContext, Tool
    from .types import (
        CompressionResult,
        Dispatcher,
        EndReason,
        ForgetReport,
        IncomingMessage,
        MemoryWrite,
        Message,
        Session,
        SwitchReason,
        ToolCall,
        ToolContext,
        Usage,
    )

__all__ = [
    "Agent",
    "CompressionResult",
    "ConfigError",
    "ContextEngine",
    "Dispatcher",
    "EndReason",
    "ForgetReport",
    "HermesCoreError",
    "HookOutcome",
    "IncomingMessage",
    "MemoryProvider",
    "MemoryWrite",
    "Message",
    "NoConfig",
    "Platform",
    "PluginContext",
    "PluginError",
    "PluginHost",
    "PluginLoadError",
    "RegistryError",
    "Session",
    "SwitchReason",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "UnknownNameError",
    "Usage",
    "__version__",
    "create_plugin_manager",
    "hookimpl",
]

_LAZY = {
    **dict.fromkeys(
        ["ConfigError", "HermesCoreError", "PluginError", "PluginLoadError", "RegistryError",
         "ToolError", "UnknownNameError"],
        "errors",
    ),
    **dict.fromkeys(["HookOutcome", "PluginHost", "create_plugin_manager"], "host"),
    "Agent": "agent",
    **dict.fromkeys(
        ["ContextEngine", "MemoryProvider", "NoConfig", "Platform", "PluginContext", "Tool"],
        "kinds",
    ),
    **dict.fromkeys(
        ["CompressionResult", "Dispatcher", "EndReason", "ForgetReport", "IncomingMessage",
         "MemoryWrite",
         "Message", "Session", "SwitchReason", "ToolCall", "ToolContext", "Usage"],
        "types",
    ),
}


def __getattr__(name: str) -> Any:
    from ._lazy import load

    return load(__name__, _LAZY, name, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
