"""Pass 1 of a compaction: clear old tool outputs, no LLM involved.

Tool results older than the protected tail and longer than ``min_chars`` characters are replaced by
:data:`~.markers.CLEARED_TOOL_OUTPUT`. The tool call that produced them stays, so the model still
sees what it did; the output itself stays in the session archive. The input list and its messages
are never modified: changed messages are new objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hermes_core.types import Message

from .markers import CLEARED_TOOL_OUTPUT

__all__ = ["clear_old_tool_outputs"]


def clear_old_tool_outputs(
    messages: Sequence[Message], end: int, *, min_chars: int = 200
) -> tuple[list[Message], list[int]]:
    """Clear tool results in ``messages[:end]`` longer than ``min_chars``.

    Returns the new list and the indices that were cleared.
    """
    out = list(messages)
    cleared: list[int] = []
    for i in range(min(end, len(out))):
        message = out[i]
        if message.role != "tool" or len(message.content) <= min_chars:
            continue
        if message.content == CLEARED_TOOL_OUTPUT:
            continue
        meta = {**message.meta, "cleared_chars": len(message.content)}
        out[i] = dataclasses.replace(message, content=CLEARED_TOOL_OUTPUT, meta=meta)
        cleared.append(i)
    return out, cleared
