"""The ``compressor`` context engine (the default ``context.engine``).

Configured by the ``compression:`` section of config.yaml (:class:`.config.CompressorConfig`).
The algorithm is described in :mod:`.engine`; docs/context-engines.md is the user guide.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_core import hookimpl
from hermes_core.compaction.errors import ContextInputError, ContextOverflowError
from hermes_core.compaction.policy import CompactionPolicy, CompactionReport, PolicyEngine

from .config import CompressorConfig
from .engine import Compressor, check_history

__all__ = [
    "CompactionPolicy",
    "CompactionReport",
    "Compressor",
    "CompressorConfig",
    "ContextInputError",
    "ContextOverflowError",
    "PolicyEngine",
    "check_history",
    "register_context_engines",
]


@hookimpl
def register_context_engines(register: Callable[[type], None]) -> None:
    register(Compressor)
