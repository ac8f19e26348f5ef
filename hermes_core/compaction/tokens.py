"""Token estimates without a tokenizer.

The estimate must be cheap enough to run over thousands of messages before every LLM call, so it
never tokenizes. What it fixes compared with a flat four characters per token:

* ASCII text (English prose, code, JSON) stays at four characters per token: ``str.isascii`` is a
  constant-time flag check in CPython, so the common case costs nothing;
* CJK ideographs, kana and hangul count one token per character (a flat chars/4 undercounts them
  about fourfold, which is how Chinese or Japanese sessions overflow a window "at 30%");
* other non-ASCII letters (accents, Cyrillic, Greek, emoji) count one token per two characters.

Each message adds a fixed overhead for its role and framing, and tool calls count their name and
their JSON arguments. Estimates are deliberately a little high rather than low: compacting a turn
early costs less than an API error for an overlong prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from hermes_core.types import Message

__all__ = [
    "MESSAGE_OVERHEAD",
    "TOOL_CALL_OVERHEAD",
    "estimate_message",
    "estimate_messages",
    "estimate_text",
    "message_token_list",
]

#: role marker and turn framing of one message
MESSAGE_OVERHEAD = 4
#: the tool_use block's framing (type, id, name keys)
TOOL_CALL_OVERHEAD = 12

# Hiragana/katakana, CJK unified ideographs (+ extension A), compatibility ideographs, hangul
# syllables, CJK punctuation and full-width forms.
# Runs (``+``) rather than single characters: removing whole runs is ~20x faster than counting
# matches one by one.
_WIDE = re.compile(
    "[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+"
)


def estimate_text(text: str) -> int:
    """Estimated tokens of ``text``."""
    n = len(text)
    if n == 0:
        return 0
    if text.isascii():
        return (n + 3) // 4
    ascii_chars = len(text.encode("ascii", "ignore"))
    wide = n - len(_WIDE.sub("", text))
    other = n - ascii_chars - wide
    return (ascii_chars + 3) // 4 + wide + (other + 1) // 2


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
# Tool-call arguments are re-estimated before every LLM call; their JSON encoding dominates the
# cost, so estimates are cached by the arguments object. The cache holds a reference to each
# object, so an id is never reused while cached; arguments are not edited after the call is made.
_ARGS_CACHE: dict[int, tuple[object, int]] = {}
_ARGS_CACHE_MAX = 50_000


def _arguments_tokens(arguments: object) -> int:
    if not arguments:
        return 1
    key = id(arguments)
    hit = _ARGS_CACHE.get(key)
    if hit is not None and hit[0] is arguments:
        return hit[1]
    try:
        tokens = estimate_text(_encode(arguments))
    except (TypeError, ValueError):
        tokens = estimate_text(str(arguments))
    if len(_ARGS_CACHE) >= _ARGS_CACHE_MAX:
        _ARGS_CACHE.clear()
    _ARGS_CACHE[key] = (arguments, tokens)
    return tokens


def estimate_message(message: Message) -> int:
    """Estimated tokens of one message as the API will see it."""
    tokens = MESSAGE_OVERHEAD + estimate_text(message.content)
    for call in message.tool_calls:
        tokens += TOOL_CALL_OVERHEAD + estimate_text(call.name) + _arguments_tokens(call.arguments)
    return tokens


def message_token_list(messages: Iterable[Message]) -> list[int]:
    """:func:`estimate_message` of each message, in order."""
    return [estimate_message(m) for m in messages]


def estimate_messages(messages: Iterable[Message]) -> int:
    """Estimated tokens of a whole history."""
    return sum(estimate_message(m) for m in messages)
