"""Errors a context engine raises for input it cannot handle."""

from __future__ import annotations

from hermes_core.errors import HermesCoreError

__all__ = ["ContextInputError", "ContextOverflowError"]


class ContextInputError(HermesCoreError):
    """The history handed to the engine is not a list of :class:`hermes_core.types.Message`."""


class ContextOverflowError(ContextInputError):
    """A message that must be kept verbatim is larger than the model's whole context window."""
