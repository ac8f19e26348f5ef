"""Why a memory write was refused.

Every refusal is a :class:`MemoryRefused` (a :class:`~hermes_core.errors.HermesCoreError`, so the CLI
prints it without a traceback). The tool turns the attributes into the JSON the model reads;
``consolidation`` marks the refusals that count towards the per-turn retry cap (the model was asked
to merge or find an entry and did not manage to).
"""

from __future__ import annotations

from hermes_core.errors import HermesCoreError

__all__ = [
    "AmbiguousMatch",
    "InvalidRequest",
    "MemoryRefused",
    "NoMatch",
    "OverLimit",
    "StoreUnreadable",
    "ThreatBlocked",
    "WriteFailed",
]


class MemoryRefused(HermesCoreError):
    """A write that did not happen; nothing on disk changed."""

    #: counts towards the per-turn consolidation-failure cap
    consolidation = False

    def __init__(
        self,
        message: str,
        *,
        target: str | None = None,
        entries: list[str] | None = None,
        usage: str | None = None,
        show_entries: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.target = target
        #: the store's entries, attached when the caller needs them to retry
        self.entries = entries
        #: "85% — 1,870/2,200" when known
        self.usage = usage
        #: the caller needs the current entries to retry (e.g. it forgot old_text)
        self.show_entries = show_entries
        #: 1-based index of the failing operation of a batch
        self.operation: int | None = None


class InvalidRequest(MemoryRefused):
    """Malformed input: empty content, unknown action or target, an entry that can never fit."""


class ThreatBlocked(MemoryRefused):
    """The content matched a threat pattern; ``category`` and ``pattern`` name it."""

    def __init__(self, message: str, *, category: str, pattern: str, target: str | None = None):
        super().__init__(message, target=target)
        self.category = category
        self.pattern = pattern


class NoMatch(MemoryRefused):
    """No entry contains the quoted text."""

    consolidation = True


class AmbiguousMatch(MemoryRefused):
    """Several different entries contain the quoted text; ``matches`` previews them."""

    def __init__(self, message: str, *, matches: list[str], target: str | None = None) -> None:
        super().__init__(message, target=target)
        self.matches = matches


class OverLimit(MemoryRefused):
    """The write would take the store over its character limit."""

    consolidation = True


class StoreUnreadable(MemoryRefused):
    """The file on disk is not valid text; it was left untouched."""


class WriteFailed(MemoryRefused):
    """The operating system refused the write (disk full, permissions); nothing changed."""
