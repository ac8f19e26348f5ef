"""The ``lossless`` context engine: compacted turns are archived verbatim and stay reachable.

Select it with ``context.engine: lossless``; settings live in the ``lossless:`` section
(:class:`.engine.LosslessConfig`). See :mod:`.engine` and docs/context-engines.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hermes_core import hookimpl

from .engine import LosslessConfig, LosslessEngine
from .records import SearchHit, Span
from .store import SpanStore

if TYPE_CHECKING:
    from hermes_core.storage.transfer import CopyProgress, CopyReport, StorageSide

__all__ = [
    "LosslessConfig",
    "LosslessEngine",
    "SearchHit",
    "Span",
    "SpanStore",
    "copy_storage",
    "register_context_engines",
]


@hookimpl
def register_context_engines(register: Callable[[type], None]) -> None:
    register(LosslessEngine)


@hookimpl
def copy_storage(source: StorageSide, target: StorageSide, progress: CopyProgress) -> CopyReport:
    """``storage migrate``: the archive of compacted turns (see :mod:`.transfer`)."""
    from .transfer import copy_archive

    return copy_archive(source, target)
