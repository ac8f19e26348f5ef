"""The add / replace / remove operations, as pure functions over a list of entries.

Nothing here touches the disk: :mod:`.store` calls :func:`validate` before it takes the lock (so a
malformed or dangerous request costs no I/O) and :func:`apply` under the lock on the freshly read
entries. A batch is applied to a copy; any error discards the copy, so a batch is all-or-nothing,
and the budget is checked once, against the final state (a batch may remove two entries and add one
on a full store).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from hermes_core import threats

from .entries import entry_problem, find_matches, joined_size, usage_label
from .errors import AmbiguousMatch, InvalidRequest, MemoryRefused, NoMatch, OverLimit, ThreatBlocked

__all__ = ["ACTIONS", "Action", "Applied", "Operation", "apply", "check_entries", "in_batch",
           "validate"]

Action = Literal["add", "replace", "remove"]
ACTIONS: tuple[Action, ...] = ("add", "replace", "remove")
_PREVIEW = 80


@dataclass(frozen=True, slots=True)
class Operation:
    """One requested change. ``old_text`` is a short unique part of the entry to change."""

    action: str
    content: str | None = None
    old_text: str | None = None


@dataclass(frozen=True, slots=True)
class Applied:
    """What one operation did. ``old_text`` is the whole entry that was replaced or removed."""

    action: Action
    content: str
    old_text: str | None = None
    #: an add whose exact text was already stored: nothing changed
    duplicate: bool = False


def _preview(entry: str) -> str:
    return entry if len(entry) <= _PREVIEW else entry[:_PREVIEW] + "..."


def validate(op: Operation, *, limit: int, target: str) -> Operation:
    """Check and normalise (strip) one operation; raise :class:`MemoryRefused` subclasses.

    Runs the threat scan on new content; needs no access to the store.
    """
    action = op.action.strip().lower() if isinstance(op.action, str) else op.action
    if action not in ACTIONS:
        raise InvalidRequest(
            f"Unknown action {op.action!r}. Use one of: add, replace, remove.", target=target
        )
    content = op.content.strip() if op.content is not None else None
    old_text = op.old_text.strip() if op.old_text is not None else None
    if action in ("replace", "remove") and not old_text:
        raise InvalidRequest(
            f"'{action}' needs old_text: a short unique part of the entry to "
            f"{'change' if action == 'replace' else 'delete'} (it was empty or only whitespace).",
            target=target,
            show_entries=True,
        )
    if action in ("add", "replace"):
        if not content:
            hint = " Use 'remove' to delete an entry." if action == "replace" else ""
            raise InvalidRequest(
                f"'{action}' needs content: the fact to store (it was empty or only "
                f"whitespace).{hint}",
                target=target,
            )
        problem = entry_problem(content, limit)
        if problem is not None:
            raise InvalidRequest(f"Cannot store this entry: {problem}.", target=target)
        finding = threats.scan(content)
        if finding is not None:
            raise ThreatBlocked(
                finding.message(), category=finding.category, pattern=finding.pattern,
                target=target,
            )
    return replace(op, action=action, content=content, old_text=old_text)


def _locate(entries: list[str], needle: str, target: str, size: int, limit: int) -> int:
    found = find_matches(entries, needle)
    if not found:
        raise NoMatch(
            f"No entry matched {needle!r}. Check the current entries and retry with a short "
            "part copied from the entry you mean.",
            target=target, entries=list(entries), usage=usage_label(size, limit),
        )
    distinct = {entries[i] for i in found}
    if len(distinct) > 1:
        raise AmbiguousMatch(
            f"{needle!r} matches {len(distinct)} different entries. Be more specific: quote a "
            "longer part that only the entry you mean contains.",
            matches=[_preview(entries[i]) for i in found], target=target,
        )
    return found[0]  # identical copies: act on the first


def _apply_one(entries: list[str], op: Operation, target: str, limit: int) -> Applied:
    size = joined_size(entries)
    if op.action == "add":
        assert op.content is not None
        if op.content in entries:
            return Applied("add", op.content, duplicate=True)
        entries.append(op.content)
        return Applied("add", op.content)
    assert op.old_text is not None
    index = _locate(entries, op.old_text, target, size, limit)
    old = entries[index]
    if op.action == "replace":
        assert op.content is not None
        entries[index] = op.content
        return Applied("replace", op.content, old_text=old)
    del entries[index]
    return Applied("remove", "", old_text=old)


def in_batch(exc: MemoryRefused, number: int, op: Operation, count: int) -> None:
    """Name operation ``number`` in the message of its refusal when it is one of a batch of
    ``count``."""
    if count > 1:
        exc.operation = number
        exc.message = (f"Operation {number} ({op.action}): {exc.message} No operation was "
                       "applied (a batch is all-or-nothing).")
        exc.args = (exc.message,)


def apply(
    entries: list[str], ops: list[Operation], *, limit: int, target: str
) -> tuple[list[str], list[Applied]]:
    """Apply validated ``ops`` in order to a copy of ``entries``; return it and what each did.

    The result may not exceed ``limit`` unless it is no larger than before (a store that is over
    its limit, after a hand edit or a lowered limit, can still shrink). Raises
    :class:`MemoryRefused` subclasses; ``entries`` is never modified.
    """
    work = list(entries)
    before = joined_size(entries)
    applied: list[Applied] = []
    for number, op in enumerate(ops, start=1):
        try:
            applied.append(_apply_one(work, op, target, limit))
        except MemoryRefused as exc:
            in_batch(exc, number, op, len(ops))
            raise
    after = joined_size(work)
    if after > limit and after > before:
        raise _over_limit(entries, ops, applied, before, after, limit, target)
    return work, applied


def _over_limit(
    entries: list[str],
    ops: list[Operation],
    applied: list[Applied],
    before: int,
    after: int,
    limit: int,
    target: str,
) -> OverLimit:
    store = "Memory" if target == "memory" else "The user profile"
    usage = usage_label(before, limit)
    advice = (
        "Consolidate now: merge related entries with 'replace' (shorter combined text) or delete "
        "stale ones with 'remove', then retry. Several operations in one call are applied "
        "all-or-nothing and only the final size counts."
    )
    if len(ops) == 1 and ops[0].action == "add":
        grow = len(applied[0].content) + (3 if entries else 0)
        text = (
            f"{store} is at [{usage}] chars. Adding this entry ({grow:,} chars with its "
            f"separator) would need {after:,}/{limit:,}. {advice}"
        )
    elif len(ops) == 1:
        text = (
            f"{store} is at [{usage}] chars; this replacement would put it at "
            f"{after:,}/{limit:,}. Write a shorter replacement, or remove stale entries first. "
            f"{advice}"
        )
    else:
        text = (
            f"{store} is at [{usage}] chars; after these {len(ops)} operations it would be at "
            f"{after:,}/{limit:,}. No operation was applied. {advice}"
        )
    return OverLimit(text, target=target, entries=list(entries), usage=usage)


def check_entries(entries: list[str], *, limit: int) -> list[str]:
    """Every reason the whole list ``entries`` cannot be stored (empty when it can).

    Used when a person rewrites a file at once (``hermes-core memory edit``): the same rules as
    for the tool, reported together so they can all be fixed in one go.
    """
    problems = []
    for number, entry in enumerate(entries, start=1):
        first_line = entry.split("\n", 1)[0]
        label = f"entry {number} ({first_line[:40]!r})"
        problem = entry_problem(entry, limit)
        if problem is not None:
            problems.append(f"{label}: {problem}")
        finding = threats.scan(entry)
        if finding is not None:
            problems.append(f"{label}: {finding.message()}")
    size = joined_size(entries)
    if size > limit:
        problems.append(
            f"the entries total {size:,} characters but the limit is {limit:,}; "
            f"remove or shorten {size - limit:,} characters"
        )
    return problems
