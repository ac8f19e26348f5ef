"""MCP both ways (built-in plugin ``mcp``).

* ``hermes-core mcp serve [--transport stdio|http]`` serves the configured memory stack to MCP
  clients (Claude Desktop, Claude Code, Cursor, other agents): see :mod:`.server`, :mod:`.serve`.
* ``mcp.servers`` in config.yaml makes other MCP servers' tools available to the agent as
  ``<server>__<tool>`` through the memory provider ``mcp`` (add it to ``memory.providers``): see
  :mod:`.client`, :mod:`.tools`.

The ``mcp`` SDK is an optional extra (``pip install 'hermes-core-kernel[mcp]'``); without it this plugin
still loads, and its commands and tools say how to install it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core import hookimpl

from .config import McpConfig, ServerSpec
from .tools import McpTools

if TYPE_CHECKING:
    from hermes_core.config import LoadedConfig
    from hermes_core.doctor import DoctorCheck

__all__ = ["McpConfig", "McpTools", "ServerSpec", "doctor_checks", "register_commands",
           "register_memory_providers"]


@hookimpl
def register_memory_providers(register: Callable[[type], None]) -> None:
    register(McpTools)


@hookimpl
def register_commands(register: Callable[[Any], None]) -> None:
    from .commands import mcp_group

    register(mcp_group)


@hookimpl
def doctor_checks(home: Path, config: LoadedConfig) -> list[DoctorCheck]:
    """mcp.servers without the ``mcp`` provider; the HTTP token file (see :mod:`.doctor`)."""
    from .doctor import mcp_checks

    return mcp_checks(home, config)
