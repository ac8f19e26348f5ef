"""The ``todo`` tool: an in-session task list that survives compactions.

The list lives in memory only (never written to disk): it is the agent's working plan for the
conversation at hand. Lists are kept per session id; when a compaction continues the conversation
in a child session, the child's first ``todo`` call adopts its parent's list (the child's
``parent_session_id`` names it), so the plan follows the conversation with no race against the
background worker. After each compaction the kernel calls :func:`on_post_compress`, which returns
the items still pending or in progress: the kernel appends them to the compacted history as a
user message, so the model keeps its bearings even when the summary glossed over the plan.

At most :data:`MAX_LISTS` lists are kept per process (least recently used dropped first), which
bounds a long-running webhook server.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hermes_core import hookimpl
from hermes_core.errors import ToolError
from hermes_core.kinds import Tool
from hermes_core.types import Message, Session, ToolContext

__all__ = ["MAX_LISTS", "TodoBoards", "TodoInput", "TodoItem", "boards", "on_post_compress",
           "register_tools", "snapshot_text"]

MAX_LISTS = 512
Status = Literal["pending", "in_progress", "completed", "cancelled"]
_OPEN = ("in_progress", "pending")


class TodoItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=64, description="A short stable id, e.g. '1'.")
    content: str | None = Field(default=None, max_length=2000,
                                description="What to do (required unless merging a status).")
    status: Status = Field(default="pending")


class TodoInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    todos: list[TodoItem] | None = Field(
        default=None, description="Omit to read the list. Otherwise the new list, or with "
        "merge=true the items to add or update by id.")
    merge: bool = Field(default=False, description="Update items by id instead of replacing.")

    @model_validator(mode="after")
    def _content_when_replacing(self) -> TodoInput:
        if self.todos is not None and not self.merge:
            missing = [item.id for item in self.todos if not (item.content or "").strip()]
            if missing:
                raise ValueError(f"items {missing} have no content; give content for every item "
                                 "when replacing the list (or set merge=true to update by id)")
        return self


class TodoBoards:
    """The lists, per session id, with parent-to-child hand-over."""

    def __init__(self, limit: int = MAX_LISTS) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._lists: OrderedDict[str, list[dict[str, str]]] = OrderedDict()

    def _find(self, session: Session | None, *, adopt: bool) -> list[dict[str, str]] | None:
        # called with the lock held
        if session is None:
            return None
        items = self._lists.get(session.id)
        if items is None and adopt and session.parent_session_id in self._lists:
            # the conversation moved to a child session (a compaction): the plan moves with it
            items = self._lists.pop(session.parent_session_id or "")
            self._lists[session.id] = items
        if items is not None:
            self._lists.move_to_end(session.id)
        return items

    def get(self, session: Session | None) -> list[dict[str, str]]:
        with self._lock:
            return [dict(i) for i in self._find(session, adopt=True) or []]

    def write(self, session: Session | None, todos: list[TodoItem], *, merge: bool) -> list[dict[str, str]]:
        if session is None:
            raise ToolError("the todo list needs a session; none was given")
        with self._lock:
            items = self._find(session, adopt=True)
            if items is None:
                items = self._lists[session.id] = []
                while len(self._lists) > self.limit:
                    self._lists.popitem(last=False)
            if not merge:
                items[:] = [{"id": t.id, "content": (t.content or "").strip(), "status": t.status}
                            for t in todos]
            else:
                by_id = {item["id"]: item for item in items}
                for t in todos:
                    if t.id in by_id:
                        by_id[t.id]["status"] = t.status
                        if t.content:
                            by_id[t.id]["content"] = t.content.strip()
                    elif not (t.content or "").strip():
                        raise ToolError(f"item {t.id!r} is not on the list; give its content "
                                        "to add it")
                    else:
                        items.append({"id": t.id, "content": (t.content or "").strip(),
                                      "status": t.status})
            return [dict(i) for i in items]

    def open_items(self, session: Session | None) -> list[dict[str, str]]:
        """Items in progress, then pending, of the session's list (adopting nothing)."""
        with self._lock:
            items = self._find(session, adopt=False) or []
            return [dict(i) for status in _OPEN for i in items if i["status"] == status]


#: the process-wide lists (the plugin module is loaded once per process)
boards = TodoBoards()


def snapshot_text(items: list[dict[str, str]]) -> str | None:
    """The note appended after a compaction, or ``None`` when nothing is open."""
    if not items:
        return None
    lines = [f"- [{i['status']}] {i['id']}. {i['content']}" for i in items]
    return ("[Task list carried over from before the context was compacted; these items are "
            "still open. Continue with them unless the user asks otherwise:]\n" + "\n".join(lines))


def _handle(args: TodoInput, context: ToolContext) -> dict[str, Any]:
    if args.todos is None:
        items = boards.get(context.session)
    else:
        items = boards.write(context.session, args.todos, merge=args.merge)
    counts = {s: sum(1 for i in items if i["status"] == s)
              for s in ("pending", "in_progress", "completed", "cancelled")}
    return {"todos": items, "counts": counts}


TOOL = Tool(
    "todo",
    "Your task list for this conversation. Use it for work of three or more steps: write the "
    "plan as items, keep exactly one in_progress, mark items completed as you finish them. "
    "Call with no arguments to read it. The list is kept across context compactions but not "
    "after the session ends.",
    _handle,
    input_model=TodoInput,
)


@hookimpl
def register_tools(register: Callable[[Tool], None]) -> None:
    register(TOOL)


@hookimpl
def on_post_compress(messages: list[Message], session: Session) -> str | None:
    return snapshot_text(boards.open_items(session))
