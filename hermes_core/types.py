"""The kernel's own data types, shared by every hook.

They are provider-neutral: nothing here knows about Anthropic, Honcho or SQLite. They are plain
slotted dataclasses rather than pydantic models because they sit on the hot path (a compaction walks
thousands of messages) and because importing them must stay cheap.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .clock import now as _now

Role = Literal["system", "user", "assistant", "tool"]

__all__ = [
    "CompressionResult",
    "Dispatcher",
    "EndReason",
    "ForgetReport",
    "IncomingMessage",
    "LLMResponse",
    "MemoryWrite",
    "Message",
    "Role",
    "Session",
    "SwitchReason",
    "ToolCall",
    "ToolContext",
    "ToolOutcome",
    "Usage",
]


class SwitchReason(enum.StrEnum):
    """Why the active session changed (the ``reason`` of ``on_session_switch``)."""

    NEW = "new"  #: the user started a fresh session (``/new``)
    RESUME = "resume"  #: an earlier session was reopened (``chat --continue``, a webhook conversation)
    COMPRESSION = "compression"  #: a compaction opened a child session; the conversation goes on
    BRANCH = "branch"  #: a copy of the conversation continues under a new id
    RESET = "reset"  #: the same conversation key was wiped and restarted
    DELEGATION = "delegation"  #: a subagent's session starts (``parent_session_id``: the delegating one)


class EndReason(enum.StrEnum):
    """Why a session ended (the ``reason`` of ``on_session_end`` and the archive's end reason)."""

    USER_EXIT = "user_exit"
    NEW_SESSION = "new_session"
    COMPRESSION = "compression"  #: recorded in the archive only; providers get a switch, not an end
    EXPIRED = "expired"
    SHUTDOWN = "shutdown"
    ERROR = "error"
    DELEGATED = "delegated"  #: a delegated child's task is done (its answer went to the parent)


@dataclass(slots=True)
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: set by a model client when it could not read the call (arguments that are not valid
    #: JSON): the tool is not run, and the model gets this text back as the call's error result
    error: str | None = None


@dataclass(slots=True)
class Message:
    """One message of a conversation.

    ``tool`` messages carry the result of the call named by ``tool_call_id``; ``assistant`` messages
    may carry ``tool_calls``. ``meta`` is for plugins' bookkeeping and is never sent to the model.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    timestamp: float = field(default_factory=_now)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Session:
    """The identity of one session, as hooks see it."""

    id: str
    platform: str = "cli"
    model: str | None = None
    title: str | None = None
    parent_session_id: str | None = None
    started_at: float = field(default_factory=_now)
    #: free-form, platform-provided identifiers (user id, chat id, conversation key, ...)
    attributes: dict[str, Any] = field(default_factory=dict)

    @property
    def user_id(self) -> str | None:
        """The user key of the conversation (``attributes["user_id"]``, set by the dispatcher
        from the platform message), or None. With ``memory.scope: user`` providers keep each
        user's memory apart by it; a compaction's child session carries it on."""
        value = self.attributes.get("user_id")
        return value if isinstance(value, str) and value else None

    @property
    def agent_context(self) -> str:
        """Who speaks in this session: ``"primary"`` (the user's conversation) or ``"subagent"``
        (a child agent's task, started by ``delegate_task``; ``attributes["agent_context"]``).
        A provider must not record a subagent's turns as the user's words: the kernel sends it
        no ``sync_turn`` or ``queue_prefetch`` for such a session."""
        value = self.attributes.get("agent_context")
        return value if isinstance(value, str) and value else "primary"


@dataclass(slots=True)
class Usage:
    """Token accounting reported by the LLM for one API call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: fresh input plus cache reads and writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_meta(self) -> dict[str, Any]:
        """The counts as plain data, as the agent stores them in an assistant message's
        ``meta["usage"]`` (so an archive can total them and a resumed session knows its size)."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cache_read_tokens": self.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens, "model": self.model}

    @classmethod
    def from_meta(cls, value: object) -> Usage | None:
        """The inverse of :meth:`as_meta`; ``None`` for anything that is not such a mapping."""
        if not isinstance(value, dict):
            return None
        keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
        try:
            counts = {k: int(value.get(k) or 0) for k in keys}
        except (TypeError, ValueError):
            return None
        model = value.get("model")
        return cls(**counts, model=model if isinstance(model, str) else None)


@dataclass(slots=True)
class MemoryWrite:
    """A successful write to a memory store, mirrored to the other providers."""

    action: Literal["add", "replace", "remove"]
    target: str
    content: str
    old_text: str | None = None
    origin: str = "assistant_tool"  #: who wrote: assistant_tool, memory_review, memory_flush, ...
    session_id: str | None = None
    provider: str | None = None  #: the provider that owns the store written to


@dataclass(slots=True)
class ForgetReport:
    """What one provider's ``forget`` found and deleted (or would delete, on a dry run)."""

    provider: str
    #: items that mention the subject (entries, messages, files, remote records)
    matched: int = 0
    #: items actually deleted (0 on a dry run)
    deleted: int = 0
    dry_run: bool = False
    #: one short line per matched item, for the user to check ("USER.md: Lives in Lisbon")
    items: list[str] = field(default_factory=list)
    #: why this provider cannot delete (some or all of) what it holds, e.g. an API without a
    #: delete call; ``None`` when it could delete everything that matched
    cannot_delete: str | None = None
    #: anything else the user should know (e.g. history versions redacted)
    notes: list[str] = field(default_factory=list)
    #: how many items the provider holds in the scope, when it knows (``None``: unknown);
    #: ``forget`` refuses a subject matching most of them unless forced
    total: int | None = None


@dataclass(slots=True)
class IncomingMessage:
    """A message a platform adapter hands to the kernel."""

    platform: str
    conversation_key: str
    text: str
    user_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    #: the sender's id of this message (the webhook's ``webhook-id``), stored on the archived
    #: user message (``meta["message_id"]``): a retry of a turn cut short reuses the stored
    #: message instead of storing it twice
    message_id: str | None = None


@dataclass(slots=True)
class LLMResponse:
    """One model response, provider-neutral."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    model: str | None = None
    #: the vendor's server-side compaction block this response opened with (sent back verbatim
    #: with the assistant message: ``Message.meta["compaction"]``), or None
    compaction: dict[str, Any] | None = None

    def as_message(self) -> Message:
        """The response as the assistant message to append to a history."""
        meta = {"compaction": dict(self.compaction)} if self.compaction is not None else {}
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls),
                       meta=meta)


@dataclass(slots=True)
class ToolContext:
    """What a tool handler knows about the call it serves."""

    session: Session | None = None
    tool_call_id: str | None = None
    #: the name of the plugin that registered the tool (set by the kernel)
    plugin_name: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    #: the running turn (a :class:`hermes_core.turn.TurnContext`: its agent, shared budget and
    #: cancellation), set by the agent loop; ``None`` when a tool is called outside a turn
    turn: Any = None


@dataclass(slots=True)
class ToolOutcome:
    """The result of one tool call, as the model will read it."""

    call: ToolCall
    plugin: str | None  #: the plugin that owns the tool; ``None`` for an unknown tool
    content: str
    is_error: bool = False
    seconds: float = 0.0
    parallel: bool = False  #: whether it ran in a parallel batch
    #: the plugin whose ``on_pre_tool_call`` blocked the call (it did not run), else ``None``
    blocked_by: str | None = None


@dataclass(slots=True)
class CompressionResult:
    """What a context engine's ``compress`` returns."""

    #: the new history, ready to send (system prompt excluded, as in the input)
    messages: list[Message]
    #: the summary text the engine produced, if any (kept for the next compaction to update)
    summary: str | None = None
    #: things the user should be told, e.g. that a fallback summary replaced a failed LLM summary
    notices: list[str] = field(default_factory=list)
    #: what the compaction did, as JSON-able data (token counts, what was summarised or archived);
    #: the kernel copies it into ``CompactionRecord.engine_report``
    report: dict[str, Any] | None = None


class Dispatcher(Protocol):
    """How a platform adapter hands incoming messages to the kernel.

    The kernel passes one to the adapter's ``connect`` hook. Both methods may block while the turn
    runs; calls for the same ``conversation_key`` are served in order, different keys in parallel.
    """

    def handle(self, message: IncomingMessage) -> str:
        """Run one turn and return the agent's reply."""
        ...

    def stream(self, message: IncomingMessage) -> Iterator[str]:
        """Run one turn and yield the reply's text as it is produced."""
        ...
