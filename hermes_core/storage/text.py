"""Text PostgreSQL cannot hold as it is: NUL characters.

SQLite's text and the home's files can hold U+0000; PostgreSQL's ``text`` cannot. A store that
must give back exactly what it was given writes :func:`encode_text` and reads :func:`decode_text`:
NUL becomes ESC + ``0`` and ESC itself (U+10FFFE, a noncharacter no real text uses) ESC + ``1``,
so every string, including one that holds ESC, comes back unchanged.
"""

from __future__ import annotations

import re

__all__ = ["decode_text", "encode_text"]

_ESC = "\U0010fffe"
_UNESCAPE = re.compile(_ESC + "([01])")


def encode_text(value: str) -> str:
    """``value`` in a form PostgreSQL text can store (unchanged when it holds no NUL or ESC)."""
    if "\x00" in value or _ESC in value:
        return value.replace(_ESC, _ESC + "1").replace("\x00", _ESC + "0")
    return value


def decode_text(value: str) -> str:
    """The inverse of :func:`encode_text`."""
    if _ESC in value:
        return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else _ESC, value)
    return value
