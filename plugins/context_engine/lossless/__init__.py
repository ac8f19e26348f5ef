"""The ``lossless`` context engine: compacted turns are archived verbatim and stay reachable.

Select it with ``context.engine: lossless``; settings live in the ``lossless:`` section
(:class:`.engine.LosslessConfig`). See :mod:`.engine` and docs/context-engines.md.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_core import hookimpl

from .engine import LosslessConfig, LosslessEngine
from .store import SearchHit, Span, SpanStore

__all__ = [
    "LosslessConfig",
    "LosslessEngine",
    "SearchHit",
    "Span",
    "SpanStore",
    "register_context_engines",
]


@hookimpl
def register_context_engines(register: Callable[[type], None]) -> None:
    register(LosslessEngine)
