"""Splitting long messages for Honcho, at the most natural boundary that fits.

Honcho stores each message whole and the real server refuses very long ones, so a message longer
than ``honcho.message_max_chars`` is stored as several. Each piece ends at a paragraph break if one
falls in the second half of the allowed length, else at a sentence end, else at a space; only a
single word longer than the limit is cut mid-word. Pieces after the first start with
``[continued] `` so a reader (or the dialectic) sees they belong together.
"""

from __future__ import annotations

import re

__all__ = ["CONTINUED", "split_message"]

CONTINUED = "[continued] "
_SENTENCE_END = re.compile("[.!?\u2026\u3002\uff01\uff1f][\"')\\]]*\\s")


def _cut(text: str, limit: int) -> int:
    """Where to end the next piece of ``text`` (which is longer than ``limit``)."""
    window = text[:limit]
    floor = limit // 2  # a boundary earlier than this would make too many small pieces
    para = window.rfind("\n\n")
    if para >= floor:
        return para + 2
    ends = [m.end() for m in _SENTENCE_END.finditer(window)]
    if ends and ends[-1] >= floor:
        return ends[-1]
    space = max(window.rfind(" "), window.rfind("\n"))
    if space >= floor:
        return space + 1
    return limit


def split_message(text: str, max_chars: int) -> list[str]:
    """``text`` as pieces of at most ``max_chars`` characters (prefix included); ``[text]`` if short.

    Nothing is dropped: joining the pieces without their prefixes gives back the text, apart from
    the whitespace at the boundaries.
    """
    if max_chars <= len(CONTINUED) + 1:
        raise ValueError(f"max_chars must be more than {len(CONTINUED) + 1}, got {max_chars}")
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    rest = text
    while rest:
        prefix = CONTINUED if pieces else ""
        room = max_chars - len(prefix)
        if len(rest) <= room:
            pieces.append(prefix + rest)
            break
        end = _cut(rest, room)
        piece = rest[:end].rstrip()
        if piece:
            pieces.append(prefix + piece)
        rest = rest[end:].lstrip()
    return pieces
