"""Errors a context engine raises for input it cannot handle."""

from __future__ import annotations

from hermes_core.errors import HermesCoreError
from hermes_core.types import Message

__all__ = ["ContextInputError", "ContextOverflowError", "check_history"]


class ContextInputError(HermesCoreError):
    """The history handed to the engine is not a list of :class:`hermes_core.types.Message`."""


class ContextOverflowError(ContextInputError):
    """A message that must be kept verbatim is larger than the model's whole context window."""


def check_history(messages: object) -> list[Message]:
    """``messages`` as a list of Message, or a :class:`ContextInputError` naming the bad item."""
    if not isinstance(messages, (list, tuple)):
        raise ContextInputError(
            f"the history must be a list of hermes_core.types.Message, got {type(messages).__name__}"
        )
    for index, item in enumerate(messages):
        if not isinstance(item, Message):
            raise ContextInputError(
                f"history item {index} is a {type(item).__name__}, not a hermes_core.types.Message; "
                "build messages with Message(role=..., content=...)"
            )
    return list(messages)
