"""Putting a compacted history together: head, summary, pinned messages, tail.

The summary goes right after the head. Its role is chosen so that it differs from both
neighbours as the API sees them (a history must open with a user turn and alternate); when no
role fits, it is merged in front of the next kept message, whose own text follows the summary's
end marker untouched. Nothing else is rewritten: kept messages are the input's objects, except
those pass 1 cleared and pinned messages that carried an earlier merged summary (the old summary
is folded into the new one, so only their own text stays).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from hermes_core.types import Message

from .boundaries import Plan
from .markers import META_KEY, is_summary_message, original_content, render_summary
from .repair import api_role, choose_summary_role

__all__ = ["assemble", "without_summary"]


def without_summary(message: Message) -> Message | None:
    """``message`` with an earlier merged summary removed; ``None`` for a stand-alone summary."""
    if not is_summary_message(message):
        return message
    own = original_content(message)
    if own is None:
        return None
    meta = {k: v for k, v in message.meta.items() if k != META_KEY}
    return dataclasses.replace(message, content=own, meta=meta)


def assemble(
    plan: Plan,
    pruned: Sequence[Message],
    summary: str | None,
    *,
    summary_meta: dict[str, Any] | None = None,
    timestamp: float | None = None,
) -> list[Message]:
    """The compacted history for ``plan``; ``pruned`` is the input after pass 1.

    With ``summary=None`` the middle is kept (a prune-only compaction).
    """
    if summary is None:
        return list(pruned)
    head = list(pruned[: plan.head_end])
    after: list[Message] = []
    for i in plan.pinned:
        kept = without_summary(pruned[i])
        if kept is not None:
            after.append(kept)
    after.extend(pruned[plan.tail_start :])

    before_role = next((api_role(m) for m in reversed(head) if m.role != "system"), None)
    after_role = api_role(after[0]) if after else None
    role = choose_summary_role(before_role, after_role)
    if role is None and after and after[0].role == "tool":
        role = "user"  # never merge into a tool result: the repair pass handles that orphan
    meta = {"summary": summary, **(summary_meta or {})}
    pinned = bool(plan.pinned)
    if role is not None:
        when = timestamp if timestamp is not None else (after[0].timestamp if after else 0.0)
        message = Message(
            role=role,  # type: ignore[arg-type]
            content=render_summary(summary, pinned=pinned),
            timestamp=when,
            meta={META_KEY: {**meta, "original": None}},
        )
        return [*head, message, *after]
    target = after[0]
    merged = dataclasses.replace(
        target,
        content=render_summary(summary, pinned=pinned, original=target.content),
        meta={**target.meta, META_KEY: {**meta, "original": target.content, "merged": True}},
    )
    return [*head, merged, *after[1:]]
