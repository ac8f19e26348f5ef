"""Choosing which part of a long conversation to show: a character budget, placed on the matches.

A conversation is a list of message lengths (after each message is capped) and the positions of
the messages that matched. The window is the contiguous run of messages that fits the budget and
holds the most matches; among equals, the one holding the best-ranked match, then the earliest.
What budget is left once no further match fits is spent on neighbouring messages, so the reader
gets as much context as the budget allows.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["place_window", "share_budget"]


def place_window(
    lengths: Sequence[int], hits: Sequence[int], budget: int
) -> tuple[int, int]:
    """Return ``(start, end)`` (end exclusive) of the window over ``lengths``.

    ``hits`` are message positions, best-ranked first. The window always holds at least one
    message: the best hit (or the first message) even when that alone exceeds the budget.
    """
    n = len(lengths)
    if n == 0:
        return 0, 0
    is_hit = [False] * n
    rank = [len(hits)] * n
    for r, pos in enumerate(hits):
        if 0 <= pos < n and not is_hit[pos]:
            is_hit[pos] = True
            rank[pos] = r
    anchor = hits[0] if hits and 0 <= hits[0] < n else 0
    best = (anchor, anchor + 1)
    best_key = (int(is_hit[anchor]), -rank[anchor], 0)
    # Two pointers: for each start, the longest window that fits; count its hits.
    end = 0
    used = 0
    count = 0
    for start in range(n):
        if end < start:
            end, used, count = start, 0, 0
        while end < n and used + lengths[end] <= budget:
            used += lengths[end]
            count += is_hit[end]
            end += 1
        if end > start:
            key = (count, -min(rank[start:end]), -start)  # the best rank inside [start, end)
            if key > best_key:
                best, best_key = (start, end), key
            used -= lengths[start]
            count -= is_hit[start]
    start, end = best
    used = sum(lengths[start:end])
    # Spend what is left on earlier context (the two pointers already extended the end).
    while start > 0 and used + lengths[start - 1] <= budget:
        start -= 1
        used += lengths[start]
    while end < n and used + lengths[end] <= budget:
        used += lengths[end]
        end += 1
    return start, end


def share_budget(needs: Sequence[int], total: int) -> list[int]:
    """Split ``total`` among conversations needing ``needs`` characters: equal shares, and what
    a short conversation does not need goes to the others (water-filling)."""
    shares = [0] * len(needs)
    remaining = total
    open_ = [i for i, need in enumerate(needs) if need > 0]
    while open_ and remaining > 0:
        each = remaining // len(open_)
        if each == 0:
            break
        still: list[int] = []
        for i in open_:
            give = min(each, needs[i] - shares[i])
            shares[i] += give
            remaining -= give
            if shares[i] < needs[i]:
                still.append(i)
        if len(still) == len(open_):
            break
        open_ = still
    return shares
