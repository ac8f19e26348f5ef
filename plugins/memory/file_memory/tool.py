"""The ``memory`` tool: how the model adds, replaces and removes entries.

Results are JSON objects. A success says ``done: true`` and deliberately does not echo the entries
(echoing them invites the model to "fix" what it just wrote, again and again). A refusal carries
``error`` and, when the model needs them to retry, the current entries and usage.

Retry loops are capped per turn: each refusal that asks the model to consolidate (the store is full,
or no entry matched) counts one failure; the refusal that reaches
``max_consolidation_failures`` (default 3) tells the model to stop calling the tool and answer the
user, and so do later ones in the same turn. A success resets the count, and so does the next user
message (the provider calls :meth:`FailureCounter.reset` from ``on_message``). Counts are kept per
session id, under a lock, so a background reviewer working under its own session never eats into
the foreground turn's allowance.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hermes_core.kinds import Curation, Tool
from hermes_core.types import MemoryWrite, ToolContext

from .entries import joined_size, usage_label
from .errors import AmbiguousMatch, InvalidRequest, MemoryRefused
from .history import Provenance
from .ops import ACTIONS, Action, Operation
from .recall import EntryRecall
from .store import FILENAMES, TARGETS, MemoryStore, WriteResult, check_target

__all__ = [
    "CURATION_INSTRUCTIONS",
    "GUIDANCE",
    "TOOL_DESCRIPTION",
    "FailureCounter",
    "MemoryOperationInput",
    "MemoryToolHandler",
    "MemoryToolInput",
    "build_tool",
    "describe_call",
    "describe_store",
    "provenance",
]

TOOL_DESCRIPTION = """\
Save durable facts to your persistent memory, which is shown in the system prompt of every \
future session. Two stores: target "memory" for your own notes (environment facts, project \
conventions, lessons learned) and target "user" for who the user is (name, role, preferences, \
how they like to work).

WHEN: the user states a preference or corrects you, you learn a stable fact about their \
environment, or something took effort to find out and will matter again.
SKIP: task progress, one-off details, anything that will be stale within a week, secrets, and \
things already in memory.
HOW: one call per update. add stores a new entry. replace and remove find the entry by old_text, \
a short part of it that no other entry contains. Several changes at once go in "operations" \
(applied all-or-nothing; only the final size must fit).
IF FULL: the error lists the entries: merge related ones with replace or remove stale ones, in \
one batched call, then add.
A success is final: do not repeat it. Writes are saved at once but the prompt's memory section \
only shows them from the next session.
SEARCH: action "search" with a query lists the saved entries that match it by words or by \
meaning (omit target to search both stores); use it before replace/remove when unsure of old_text."""


def _one_of(*actions: str) -> Callable[[Any], Any]:
    """The check of an ``action`` field: one of ``actions`` (named in the refusal), or None."""

    def check(value: Any) -> Any:
        if value is not None and value not in actions:
            raise ValueError(f"unknown action {value!r}; use one of: {', '.join(actions)}")
        return value

    return check


#: what the tool's ``action`` accepts: the write operations, and the read-only search
ToolAction = Literal["add", "replace", "remove", "search"]
#: entries one search returns at most
SEARCH_LIMIT = 8


class MemoryOperationInput(BaseModel):
    """One operation of a batch."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    content: str | None = Field(default=None, description="The entry text (add, replace).")
    old_text: str | None = Field(
        default=None, description="A short unique part of the entry to change (replace, remove)."
    )

    _action = field_validator("action", mode="before")(_one_of(*ACTIONS))


class MemoryToolInput(BaseModel):
    """The arguments of the ``memory`` tool."""

    model_config = ConfigDict(extra="forbid")

    action: ToolAction | None = Field(
        default=None,
        description="add, replace, remove or search (omit when giving operations).",
    )
    target: Literal["memory", "user"] = Field(
        default="memory", description='"memory" (your notes) or "user" (the user\'s profile).'
    )
    content: str | None = Field(default=None, description="The entry text (add, replace).")
    old_text: str | None = Field(
        default=None, description="A short unique part of the entry to change (replace, remove)."
    )
    operations: list[MemoryOperationInput] | None = Field(
        default=None, description="Several operations on one target, applied all-or-nothing."
    )
    query: str | None = Field(
        default=None, max_length=4000,
        description="What to look for (search): words or a question; matched by words and meaning.",
    )

    _action = field_validator("action", mode="before")(_one_of(*ACTIONS, "search"))

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, value: Any) -> Any:
        if value is None:
            return "memory"
        if value not in TARGETS:
            raise ValueError(f"unknown target {value!r}; use 'memory' or 'user'")
        return value


def provenance(context: ToolContext) -> Provenance:
    """Who is writing, from the tool call's context.

    A background review or pre-compaction flush calls the tool in a session of its own whose
    attributes carry ``origin`` (``memory_review``, ``memory_flush``) and, as
    ``origin_session_id`` (or else its parent), the conversation it works for; a call from the
    conversation itself is ``assistant_tool``. The message id is the tool call's id.
    """
    session = context.session
    if session is None:
        return Provenance("assistant_tool", None, context.tool_call_id)
    origin = session.attributes.get("origin")
    if not isinstance(origin, str) or not origin:
        return Provenance("assistant_tool", session.id, context.tool_call_id)
    owner = session.attributes.get("origin_session_id") or session.parent_session_id or session.id
    return Provenance(origin, str(owner), context.tool_call_id)


class FailureCounter:
    """Failed consolidation attempts in the current turn, per session id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str | None, int] = {}

    def fail(self, session_id: str | None) -> int:
        with self._lock:
            count = self._counts.get(session_id, 0) + 1
            self._counts[session_id] = count
            return count

    def reset(self, session_id: str | None) -> None:
        with self._lock:
            self._counts.pop(session_id, None)


_MESSAGES = {
    "add": "Entry added.",
    "replace": "Entry replaced.",
    "remove": "Entry removed.",
}


class MemoryToolHandler:
    """Runs tool calls against a store; see the module docstring for the result shapes."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        enabled: Callable[[str], bool],
        max_failures: int,
        notify: Callable[[MemoryWrite], None],
        recall: EntryRecall,
        provider: str = "file_memory",
    ) -> None:
        self.store = store
        self.recall = recall
        self.enabled = enabled
        self.max_failures = max_failures
        self.notify = notify
        self.provider = provider
        self.failures = FailureCounter()

    def __call__(self, args: MemoryToolInput, context: ToolContext) -> dict[str, Any]:
        session_id = context.session.id if context.session is not None else None
        target = args.target
        if args.action == "search":
            return self._search(args)
        try:
            check_target(target)
            if not self.enabled(target):
                key = "memory_enabled" if target == "memory" else "user_profile_enabled"
                raise InvalidRequest(
                    f"The {target!r} store is turned off in config (file_memory.{key}: false); "
                    "do not write to it.",
                    target=target,
                )
            ops = self._operations(args)
            by = provenance(context)
            result = self.store.apply(target, ops, by=by)
        except MemoryRefused as exc:
            return self._refusal(exc, args, session_id)
        self.failures.reset(session_id)
        self._mirror(result, origin_session=session_id, origin=by.origin)
        self.recall.warm(result.entries)  # the new entry's vector, off this call's path
        return self._success(result)

    def _search(self, args: MemoryToolInput) -> dict[str, Any]:
        """The entries matching ``args.query`` by words and meaning, best first."""
        query = (args.query or args.content or "").strip()
        if not query:
            return {"success": False, "error": "search needs a query: the words or question to "
                                               "look for, e.g. {\"action\": \"search\", "
                                               "\"query\": \"editor\"}"}
        targets = [args.target] if "target" in args.model_fields_set else list(TARGETS)
        entries = [(t, e) for t in targets if self.enabled(t) for e in self.store.entries(t)]
        hits, problem = self.recall.rank(query, entries)
        found = [(h.target, h.entry, h.via, h.score) for h in hits]
        out: dict[str, Any] = {
            "success": True,
            "query": query,
            "results": [{"target": t, "entry": _clip(e, _MAX_ENTRY_PREVIEW * 2), "found_by": via,
                         "score": round(score, 3)} for t, e, via, score in found[:SEARCH_LIMIT]],
            "semantic": problem or "on",
        }
        if not found:
            out["note"] = "no saved entry matches; the memory may not hold this"
        elif len(found) > SEARCH_LIMIT:
            out["note"] = f"showing the best {SEARCH_LIMIT} of {len(found)} matching entries"
        return out

    # -------------------------------------------------------------------------------- parts

    @staticmethod
    def _operations(args: MemoryToolInput) -> list[Operation]:
        if args.operations is not None:
            if args.action is not None:
                raise InvalidRequest(
                    "Give either action (one operation) or operations (a batch), not both.",
                    target=args.target,
                )
            if not args.operations:
                raise InvalidRequest(
                    "operations is empty; give at least one add, replace or remove.",
                    target=args.target,
                )
            return [Operation(o.action, o.content, o.old_text) for o in args.operations]
        if args.action is None or args.action == "search":
            raise InvalidRequest(
                "action is required: add, replace or remove (or give operations for a batch).",
                target=args.target,
            )
        return [Operation(args.action, args.content, args.old_text)]

    def _mirror(self, result: WriteResult, *, origin_session: str | None, origin: str) -> None:
        for applied in result.applied:
            if applied.duplicate:
                continue
            self.notify(
                MemoryWrite(
                    action=applied.action,
                    target=result.target,
                    content=applied.content,
                    old_text=applied.old_text,
                    origin=origin,
                    session_id=origin_session,
                    provider=self.provider,
                )
            )

    def _success(self, result: WriteResult) -> dict[str, Any]:
        real = [a for a in result.applied if not a.duplicate]
        if not real:
            message = "Entry already exists (nothing added)."
        elif len(result.applied) == 1:
            message = _MESSAGES[real[0].action]
        else:
            skipped = len(result.applied) - len(real)
            message = f"Applied {len(real)} operation(s)."
            if skipped:
                message += f" Skipped {skipped} add(s) already stored."
        out: dict[str, Any] = {
            "success": True,
            "done": True,
            "target": result.target,
            "usage": f"{result.usage} chars",
            "entry_count": len(result.entries),
            "message": message,
            "note": "Saved. This update is complete; do not repeat it.",
        }
        if result.backup is not None:
            out["backup"] = str(result.backup)
            out["message"] += (
                f" The file had been edited outside the memory tool; its previous text was "
                f"copied to {result.backup} before it was rewritten."
            )
        return out

    def _refusal(
        self, exc: MemoryRefused, args: MemoryToolInput, session_id: str | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"success": False, "error": exc.message}
        if exc.consolidation:
            count = self.failures.fail(session_id)
            if count >= self.max_failures:
                out["done"] = True
                out["error"] = (
                    f"{exc.message} This is failed memory attempt {count} in this turn: stop "
                    "calling the memory tool now and continue with your reply to the user. The "
                    "memory was not changed; you can consolidate it in a later turn."
                )
                return out
            out["attempts_left"] = self.max_failures - count
        if isinstance(exc, AmbiguousMatch):
            out["matches"] = exc.matches
        entries, usage = exc.entries, exc.usage
        target = exc.target or args.target
        if entries is None and exc.show_entries and target in TARGETS:
            entries = self.store.read(target).entries
        if entries is not None:
            out["current_entries"] = entries
            if usage is None:
                usage = usage_label(joined_size(entries), self.store.limit(target))
            out["usage"] = f"{usage} chars"
        if exc.operation is not None:
            out["operation"] = exc.operation
        return _bounded(out)


#: a refusal is read by the model: it shows at most this much of the stored text
MAX_RESULT_CHARS = 8000
_MAX_ENTRY_PREVIEW = 400
_MAX_ERROR_CHARS = 2000


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 40] + f" [... {len(text) - limit + 40} more characters]"


def _bounded(out: dict[str, Any]) -> dict[str, Any]:
    """Cap a refusal's size: a hand-edited file of megabytes must not become a tool result of
    megabytes. Entries are previewed, and those past the budget are counted, not listed."""
    out["error"] = _clip(str(out["error"]), _MAX_ERROR_CHARS)
    for key in ("current_entries", "matches"):
        items = out.get(key)
        if not isinstance(items, list):
            continue
        budget = MAX_RESULT_CHARS // 2
        shown: list[str] = []
        for item in items:
            preview = _clip(str(item), _MAX_ENTRY_PREVIEW)
            if budget - len(preview) < 0:
                break
            budget -= len(preview)
            shown.append(preview)
        if len(shown) < len(items) or any(len(str(i)) > _MAX_ENTRY_PREVIEW for i in items):
            out[f"{key}_note"] = (f"showing {len(shown)} of {len(items)} entries, long ones "
                                  "shortened; the file is too large to list in full")
        out[key] = shown
    return out


#: the system prompt's guidance for a session offering the tool
GUIDANCE = (
    "Use the `memory` tool to keep durable facts: the user's preferences, circumstances and "
    "corrections, and lessons about their environment. Save them when you learn them; do not save "
    "task progress or anything only this conversation needs. What you save appears in this prompt "
    "from the next session on."
)
#: what the memory review and flush (the memory_review plugin) tell the model about the tool's targets
CURATION_INSTRUCTIONS = (
    "Use the memory tool: target \"user\" for who the user is, \"memory\" for your own notes."
)


def _short(text: object, limit: int = 80) -> str:
    flat = " ".join(str(text or "").split())
    return f'"{flat}"' if len(flat) <= limit else f'"{flat[:limit - 1]}…"'


def describe_call(arguments: dict[str, Any], result: str) -> list[str]:
    """Human descriptions of the changes a successful ``memory`` call made (for the memory review's
    ``memory updated: ...`` notice); nothing for a refused call or a duplicate add."""
    try:
        data = json.loads(result)
    except ValueError:
        return []
    if not isinstance(data, dict) or data.get("success") is not True:
        return []
    if str(data.get("message", "")).startswith("Entry already exists"):
        return []
    name = FILENAMES.get(str(arguments.get("target") or "memory"), "MEMORY.md")
    ops = arguments.get("operations") or [arguments]
    out = []
    for op in ops if isinstance(ops, list) else []:
        if not isinstance(op, dict):
            continue
        action, content, old = op.get("action"), op.get("content"), op.get("old_text")
        if action == "add":
            out.append(f"added to {name}: {_short(content)}")
        elif action == "replace":
            out.append(f"replaced in {name}: {_short(old)} -> {_short(content)}")
        elif action == "remove":
            out.append(f"removed from {name}: {_short(old)}")
    return out


def describe_store(store: MemoryStore, targets: tuple[str, ...] = TARGETS) -> str:
    """What both files hold now, for the memory review's prompt."""
    parts = []
    for target in targets:
        name = FILENAMES[target]
        listed = "\n".join(f"- {e}" for e in store.entries(target)) or "(empty)"
        parts.append(f"{name} (target \"{target}\") now holds:\n{listed}")
    return "\n\n".join(parts)


def build_tool(handler: MemoryToolHandler) -> Tool:
    """The ``memory`` Tool object served by ``get_tools``: its prompt guidance and its part in
    the memory review's curation (review, flush; the ``memory_review`` plugin) travel with it."""
    return Tool(
        name="memory",
        description=TOOL_DESCRIPTION,
        handler=handler,
        input_model=MemoryToolInput,
        parallel_safe=False,  # writes to one file: order matters and the lock serialises anyway
        guidance=GUIDANCE,
        curation=Curation(
            role="memory",
            instructions=CURATION_INSTRUCTIONS,
            snapshot=lambda: describe_store(handler.store),
            describe=describe_call,
        ),
    )
