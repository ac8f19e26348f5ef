"""hermes-core-hindsight: long-term semantic memory for hermes-core in a Hindsight server.

Installed as its own distribution, it reaches hermes-core only through the ``hermes_core.plugins``
entry point, which names this module: the kernel calls :func:`register_memory_providers` and
activates :class:`HindsightMemory` when ``memory.providers`` lists ``hindsight``.

User documentation: the README.md of this distribution.
"""

from __future__ import annotations

from typing import Any

from hermes_core import hookimpl

from .client import (
    HindsightClient,
    HindsightError,
    HindsightNoLLM,
    HindsightRejected,
    HindsightUnavailable,
    Memory,
    ServerInfo,
)
from .config import HindsightConfig
from .provider import HindsightMemory

__all__ = [
    "HindsightClient",
    "HindsightConfig",
    "HindsightError",
    "HindsightMemory",
    "HindsightNoLLM",
    "HindsightRejected",
    "HindsightUnavailable",
    "Memory",
    "ServerInfo",
    "register_memory_providers",
]

__version__ = "0.1.0"


@hookimpl
def register_memory_providers(register: Any) -> None:
    register(HindsightMemory)
