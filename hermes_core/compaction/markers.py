"""The fixed texts a compaction leaves in a history, and how to recognise them later.

A compaction summary is a message whose content starts with :data:`SUMMARY_HEADER`. It is either a
message of its own or merged in front of the first kept message (when no role fits between its
neighbours); in the merged form the original content follows :data:`END_MARKER`. Recognising
summaries from the text (and not only from ``meta``) matters because a history reloaded from an
archive may have lost its ``meta``; a later compaction must still find the previous summary to
update it instead of starting over.
"""

from __future__ import annotations

from typing import Any

from hermes_core.types import Message

__all__ = [
    "CLEARED_TOOL_OUTPUT",
    "END_MARKER",
    "META_KEY",
    "PINNED_NOTE",
    "SUMMARY_HEADER",
    "SUMMARY_PREFIX",
    "is_standalone_summary",
    "is_summary_message",
    "original_content",
    "render_summary",
    "split_summary",
    "summary_body",
]

#: what pass 1 leaves in place of an old tool result
CLEARED_TOOL_OUTPUT = "[Old tool output cleared to save context space]"
#: the key under ``Message.meta`` where a compaction records what it did
META_KEY = "compaction"

SUMMARY_HEADER = "[Context compaction]"
SUMMARY_PREFIX = (
    f"{SUMMARY_HEADER} Earlier turns of this conversation were compacted to save context space; "
    "the summary below, written for you, replaces them. Read it as background, not as new "
    "instructions: do not answer questions quoted in it and do not redo work it records as "
    "done. Everything after the summary is verbatim, and the latest user message is the one to "
    "act on. All your tools are still available. MEMORY.md and USER.md remain authoritative "
    "over anything in this summary."
)
PINNED_NOTE = (
    "The user's latest request and your latest reply were kept verbatim after this summary; the "
    "summary may already record progress made on that request."
)
END_MARKER = "[End of compacted context. The conversation continues below.]"


def render_summary(body: str, *, pinned: bool = False, original: str | None = None) -> str:
    """The content of a summary message (``original``: the merged message's own content)."""
    prefix = f"{SUMMARY_PREFIX} {PINNED_NOTE}" if pinned else SUMMARY_PREFIX
    text = f"{prefix}\n\n{body.strip()}\n\n{END_MARKER}"
    return f"{text}\n\n{original}" if original is not None else text


def split_summary(content: str) -> tuple[str, str | None] | None:
    """``(body, original)`` of a summary text, or ``None`` when ``content`` is not one.

    ``original`` is the merged message's own content (``None`` for a stand-alone summary).
    """
    if not content.startswith(SUMMARY_HEADER):
        return None
    start = content.find("\n\n")
    end = content.rfind(END_MARKER)
    if start < 0 or end < start:
        # a damaged summary (e.g. truncated): keep everything after the prefix as the body
        return (content[start + 2 :] if start >= 0 else "").strip(), None
    body = content[start + 2 : end].strip()
    rest = content[end + len(END_MARKER) :]
    if rest.startswith("\n\n"):
        return body, rest[2:]
    return body, (rest or None)


def _meta(message: Message) -> dict[str, Any] | None:
    value = message.meta.get(META_KEY) if message.meta else None
    return value if isinstance(value, dict) and "summary" in value else None


def is_summary_message(message: Message) -> bool:
    """Whether ``message`` holds a compaction summary (stand-alone or merged)."""
    return _meta(message) is not None or message.content.startswith(SUMMARY_HEADER)


def is_standalone_summary(message: Message) -> bool:
    """Whether ``message`` is a summary of its own (not merged in front of a kept message)."""
    return original_content(message) is None


def summary_body(message: Message) -> str | None:
    """The summary text held by ``message``, or ``None``."""
    meta = _meta(message)
    if meta is not None:
        return str(meta["summary"])
    parsed = split_summary(message.content)
    return parsed[0] if parsed else None


def original_content(message: Message) -> str | None:
    """A summary message's own content: the merged message's text, ``None`` if stand-alone.

    For a message that is not a summary, its content.
    """
    if not is_summary_message(message):
        return message.content
    meta = _meta(message)
    if meta is not None and "original" in meta:
        original = meta["original"]
        return None if original is None else str(original)
    parsed = split_summary(message.content)
    return parsed[1] if parsed else message.content
