"""Making a history valid to send: tool-call pairs, role alternation, the summary's role.

The Messages API rejects a history where a tool result answers no tool call of the turn just
before it, or where a tool call has no result. A compaction never creates such breaks (its cuts
follow tool groups), but the input may already hold them (an interrupted turn, a hand-edited
transcript), so every compacted history goes through :func:`repair_tool_pairs`:

* a tool result separated from its call is moved back next to it;
* a result whose call does not exist (or came after it) is removed as an orphan;
* a call that has no result anywhere gets a stub result saying so.

Roles are checked as the API sees them: a ``tool`` message travels in a user turn. Two user turns
or two assistant turns in a row are merged (their texts joined), never dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from hermes_core.types import Message

__all__ = [
    "STUB_RESULT",
    "RepairReport",
    "api_role",
    "choose_summary_role",
    "history_problems",
    "merge_adjacent_roles",
    "repair_tool_pairs",
]

STUB_RESULT = (
    "[No result was recorded for this tool call: the turn was interrupted or its output was "
    "lost. Treat the call as not completed and run it again if it is still needed.]"
)


@dataclass(slots=True)
class RepairReport:
    orphans_removed: int = 0
    stubs_added: int = 0
    results_moved: int = 0
    turns_merged: int = 0

    def notices(self) -> list[str]:
        out = []
        if self.orphans_removed:
            out.append(
                f"removed {self.orphans_removed} tool result(s) whose tool call is not in the "
                "history (orphans); they remain in the session archive"
            )
        if self.stubs_added:
            out.append(
                f"added a stub result to {self.stubs_added} tool call(s) that had no result"
            )
        if self.results_moved:
            out.append(f"moved {self.results_moved} tool result(s) back next to their tool call")
        if self.turns_merged:
            out.append(f"merged {self.turns_merged} consecutive same-role message(s)")
        return out


def api_role(message: Message) -> str:
    """The role of the API turn that carries ``message`` (tool results travel as user turns)."""
    return "user" if message.role == "tool" else message.role


def repair_tool_pairs(messages: Sequence[Message]) -> tuple[list[Message], RepairReport]:
    """Every tool call followed by exactly its results; see the module docstring. O(n)."""
    report = RepairReport()
    by_id: dict[str, list[int]] = {}
    for i, message in enumerate(messages):
        if message.role == "tool" and message.tool_call_id:
            by_id.setdefault(message.tool_call_id, []).append(i)
    consumed: set[int] = set()
    out: list[Message] = []
    for i, message in enumerate(messages):
        if message.role == "tool":
            if i not in consumed:
                report.orphans_removed += 1
            continue
        out.append(message)
        if message.role == "assistant" and message.tool_calls:
            out += _results_of(messages, i, by_id, consumed, report)
    return out, report


def _results_of(
    messages: Sequence[Message],
    i: int,
    by_id: dict[str, list[int]],
    consumed: set[int],
    report: RepairReport,
) -> list[Message]:
    """The results to place after the tool calls of ``messages[i]``: those right after it in
    their order, then each missing one moved from later on or stubbed. Indices taken are added
    to ``consumed``."""
    message = messages[i]
    results, placed = _adjacent_results(messages, i, consumed)
    for call in message.tool_calls:
        if call.id in placed:
            continue
        later = [k for k in by_id.get(call.id, ()) if k > i and k not in consumed]
        if later:
            results.append(messages[later[0]])
            consumed.add(later[0])
            report.results_moved += 1
        else:
            results.append(
                Message(
                    role="tool",
                    content=STUB_RESULT,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    timestamp=message.timestamp,
                    meta={"stub": True},
                )
            )
            report.stubs_added += 1
        placed.add(call.id)
    return results


def _adjacent_results(
    messages: Sequence[Message], i: int, consumed: set[int]
) -> tuple[list[Message], set[str]]:
    """The results in the contiguous run of tool messages after ``messages[i]`` that answer one
    of its calls (the first result per call), and the ids they answer."""
    wanted = {call.id for call in messages[i].tool_calls}
    results: list[Message] = []
    placed: set[str] = set()
    j = i + 1
    while j < len(messages) and messages[j].role == "tool":
        call_id = messages[j].tool_call_id
        if call_id in wanted and call_id not in placed and j not in consumed:
            results.append(messages[j])
            consumed.add(j)
            placed.add(call_id)
        j += 1
    return results, placed


def _joined(first: str, second: str) -> str:
    return f"{first}\n\n{second}" if first and second else first or second


def merge_adjacent_roles(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """Merge consecutive user messages, and an assistant message into the next assistant one.

    A tool result followed by a user message is left alone (the API carries both in one user
    turn). An assistant message with tool calls is never merged into a later one (its results
    follow it). Returns the new list and how many merges happened.
    """
    out: list[Message] = []
    merged = 0
    for message in messages:
        prev = out[-1] if out else None
        if prev is not None and prev.role == message.role == "user":
            out[-1] = dataclasses.replace(
                prev, content=_joined(prev.content, message.content), meta={**message.meta, **prev.meta}
            )
            merged += 1
        elif (
            prev is not None
            and prev.role == message.role == "assistant"
            and not prev.tool_calls
        ):
            out[-1] = dataclasses.replace(
                message,
                content=_joined(prev.content, message.content),
                meta={**prev.meta, **message.meta},
            )
            merged += 1
        else:
            out.append(message)
    return out, merged


def choose_summary_role(before: str | None, after: str | None) -> str | None:
    """The role for a summary between API roles ``before`` and ``after``; ``None`` = merge it.

    The summary must differ from both neighbours; the first message of a history must be a user
    message. When no role fits (user before and assistant after, or the reverse) the caller merges
    the summary into the message after it.
    """
    if before is None:
        return None if after == "user" else "user"
    for role in ("user", "assistant"):
        if role != before and role != after:
            return role
    return None


def history_problems(messages: Sequence[Message]) -> list[str]:
    """Every way ``messages`` would be rejected or misread by the API; empty when valid.

    Indices count non-system messages only.
    """
    problems: list[str] = []
    body = [m for m in messages if m.role != "system"]
    if body and body[0].role != "user":
        problems.append(f"the first message is {body[0].role!r}, not 'user'")
    pending: set[str] = set()
    prev: Message | None = None
    for i, message in enumerate(body):
        if message.role == "tool":
            if message.tool_call_id in pending:
                pending.discard(message.tool_call_id)
            else:
                problems.append(
                    f"message {i} is a tool result for {message.tool_call_id!r}, which the "
                    "assistant message just before it did not call (or already got)"
                )
        else:
            if pending:
                problems.append(f"tool call(s) {sorted(pending)} before message {i} have no result")
            if prev is not None and prev.role == message.role:
                problems.append(f"messages {i - 1} and {i} are both {message.role!r}")
            pending = {call.id for call in message.tool_calls} if message.role == "assistant" else set()
        prev = message
    if pending:
        problems.append(f"tool call(s) {sorted(pending)} at the end have no result")
    return problems
