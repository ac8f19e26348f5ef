"""Pass 1 of a compaction: clear old tool outputs, no LLM involved.

Tool results older than the protected tail and longer than ``min_chars`` characters are replaced by
:data:`~.markers.CLEARED_TOOL_OUTPUT`. The tool call that produced them stays, so the model still
sees what it did; the output itself stays wherever the history is stored. The input list and its
messages are never modified: changed messages are new objects.

Choosing (:func:`prunable`) is separate from rewriting (:func:`clear`) because a compaction that
summarises the middle only needs the head and the pinned messages rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hermes_core.compaction.markers import CLEARED_TOOL_OUTPUT
from hermes_core.compaction.tokens import MESSAGE_OVERHEAD, estimate_text
from hermes_core.types import Message

__all__ = ["clear", "prunable", "tokens_freed"]


def prunable(messages: Sequence[Message], end: int, *, min_chars: int = 200) -> list[int]:
    """Indices of tool results in ``messages[:end]`` that pass 1 clears."""
    return [
        i
        for i in range(min(end, len(messages)))
        if messages[i].role == "tool"
        and len(messages[i].content) > min_chars
        and messages[i].content != CLEARED_TOOL_OUTPUT
    ]


def cleared_copy(message: Message) -> Message:
    """``message`` with its output cleared (built directly: ``dataclasses.replace`` is slower)."""
    return Message(
        role=message.role,
        content=CLEARED_TOOL_OUTPUT,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        timestamp=message.timestamp,
        meta={**message.meta, "cleared_chars": len(message.content)},
    )


def clear(messages: Sequence[Message], indices: Iterable[int]) -> list[Message]:
    """A copy of ``messages`` with the outputs at ``indices`` cleared."""
    out = list(messages)
    for i in indices:
        out[i] = cleared_copy(out[i])
    return out


def tokens_freed(tokens: Sequence[int], cleared: Iterable[int]) -> int:
    """The tokens clearing the outputs at ``cleared`` frees (each leaves its marker behind)."""
    marker = estimate_text(CLEARED_TOOL_OUTPUT) + MESSAGE_OVERHEAD
    return sum(tokens[i] - marker for i in cleared)
