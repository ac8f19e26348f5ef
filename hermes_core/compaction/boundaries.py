"""Where a compaction cuts: the protected head, the protected tail, and the pinned messages.

The history is split into ``head | middle | tail``. The head and the tail are kept verbatim; the
middle is summarised, except for *pinned* messages: the latest user request and the latest
assistant reply (with its tool results), which are never summarised away.

Rules, each key with one meaning:

* the head is the leading system messages plus ``protect_first_n`` messages, but only before the
  first compaction: once a summary exists, early turns are no longer protected (otherwise they
  would be immortal, one of Hermes' known weaknesses);
* the tail keeps ``tail_budget`` tokens and never fewer than ``protect_last_n`` messages;
* a cut never separates an assistant's tool calls from their results: the head grows forward to
  the end of a tool group, the tail grows backward to its start;
* the latest user request and assistant reply are *pinned* where they are instead of dragging the
  tail cut back to them, so a long tool loop after the last request still compacts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hermes_core.types import Message

from .markers import is_summary_message, original_content

__all__ = ["Plan", "group_bounds", "plan_compaction"]


@dataclass(slots=True)
class Plan:
    """The cut for one compaction; indices refer to the input history."""

    n: int
    head_end: int
    tail_start: int
    #: indices in ``[head_end, tail_start)`` that stay verbatim, ascending (a pinned message that
    #: carries an earlier merged summary keeps only its own content)
    pinned: tuple[int, ...] = ()
    #: indices of earlier compaction summaries inside the middle
    summaries: tuple[int, ...] = ()
    tokens: list[int] = field(default_factory=list)
    #: why nothing can be compacted, when the middle is empty
    reason: str | None = None

    @property
    def middle(self) -> list[int]:
        """Indices that will be summarised (pins excluded; earlier summaries included)."""
        skip = set(self.pinned)
        return [i for i in range(self.head_end, self.tail_start) if i not in skip]

    @property
    def kept(self) -> list[int]:
        """Indices kept verbatim: head, pins, tail."""
        return [*range(self.head_end), *self.pinned, *range(self.tail_start, self.n)]

    def tokens_of(self, indices: Sequence[int]) -> int:
        return sum(self.tokens[i] for i in indices)

    @property
    def head_tokens(self) -> int:
        return sum(self.tokens[: self.head_end])

    @property
    def tail_tokens(self) -> int:
        return sum(self.tokens[self.tail_start :])


def group_bounds(messages: Sequence[Message]) -> tuple[list[int], list[int]]:
    """For each index: where its tool group starts, and where the group ending there ends.

    ``start[i]`` is the index of the assistant message whose tool calls a tool result ``i``
    answers (the contiguous run of tool messages after it), else ``i``. ``end[i]`` is, for an
    assistant with tool calls, the index just past its run of results, else ``i + 1``.
    """
    n = len(messages)
    start = list(range(n))
    end = [i + 1 for i in range(n)]
    owner = -1
    for i, message in enumerate(messages):
        if message.role == "tool":
            if owner >= 0:
                start[i] = owner
                end[owner] = i + 1
        elif message.role == "assistant" and message.tool_calls:
            owner = i
        else:
            owner = -1
    return start, end


def _latest(messages: Sequence[Message], role: str, lo: int, hi: int) -> int | None:
    """The latest message of ``role`` in ``[lo, hi)`` with real text of its own."""
    for i in range(hi - 1, lo - 1, -1):
        message = messages[i]
        if message.role != role:
            continue
        own = original_content(message)
        if own is not None and own.strip():
            return i
    return None


def plan_compaction(
    messages: Sequence[Message],
    tokens: list[int],
    *,
    protect_first_n: int,
    protect_last_n: int,
    tail_budget: int,
) -> Plan:
    """Decide the cut; pure and O(n)."""
    n = len(messages)
    start, end = group_bounds(messages)
    summaries = [i for i, m in enumerate(messages) if is_summary_message(m)]
    head_end = _head_end(messages, start, end, has_summary=bool(summaries),
                         protect_first_n=protect_first_n)
    tail_start = _tail_start(tokens, start, head_end, protect_last_n=protect_last_n,
                             tail_budget=tail_budget)

    plan = Plan(n=n, head_end=head_end, tail_start=tail_start, tokens=tokens)
    if summaries and summaries[-1] >= tail_start:
        # The last summary is still inside the protected tail: everything older than it was
        # compacted a moment ago, so there is nothing left to compact.
        plan.tail_start = head_end
        plan.reason = "the latest compaction summary is still inside the protected tail"
        return plan
    plan.summaries = tuple(i for i in summaries if head_end <= i < tail_start)
    plan.pinned = _pins(messages, end, head_end, tail_start)
    old_summaries = set(plan.summaries)
    if not any(i not in old_summaries or original_content(messages[i]) for i in plan.middle):
        plan.reason = (
            "every message is protected: the head, the pinned latest request/reply and the "
            f"tail (at least protect_last_n={protect_last_n} messages) cover the whole history"
        )
    return plan


def _head_end(
    messages: Sequence[Message], start: list[int], end: list[int], *, has_summary: bool,
    protect_first_n: int,
) -> int:
    """Past the leading system messages (plus ``protect_first_n`` before any compaction),
    grown forward to the end of a tool group."""
    n = len(messages)
    leading_system = 0
    while leading_system < n and messages[leading_system].role == "system":
        leading_system += 1
    head_end = leading_system if has_summary else min(n, leading_system + protect_first_n)
    if 0 < head_end < n:
        head_end = max(head_end, end[start[head_end - 1]])
    return head_end


def _tail_start(
    tokens: list[int], start: list[int], head_end: int, *, protect_last_n: int, tail_budget: int,
) -> int:
    """Newest first, until the budget is spent and the message floor is met; grown backward to
    the start of a tool group, never into the head."""
    n = len(start)
    i, spent, count = n, 0, 0
    while i > head_end:
        cost = tokens[i - 1]
        if count >= protect_last_n and spent + cost > tail_budget:
            break
        spent += cost
        count += 1
        i -= 1
    return max(head_end, start[i] if i < n else n)


def _pins(messages: Sequence[Message], end: list[int], head_end: int, tail_start: int) -> tuple[int, ...]:
    """The latest user request and the latest reply (with its tool results) inside the middle."""
    n = len(messages)
    pins: set[int] = set()
    user = _latest(messages, "user", 0, n)
    if user is not None and head_end <= user < tail_start:
        pins.add(user)
    reply = _latest(messages, "assistant", 0, n)
    if reply is not None and head_end <= reply < tail_start:
        pins.update(range(reply, end[reply]))
    return tuple(sorted(pins))
