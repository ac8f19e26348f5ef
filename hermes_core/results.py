"""What a turn, a compaction and a memory review did: :class:`TurnResult`,
:class:`CompactionRecord` and :class:`CurationReport`, the records
:class:`~hermes_core.agent.Agent` returns, and :func:`estimate_tokens`, the request-size estimate
the first two report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .types import Message, Usage

if TYPE_CHECKING:
    from .hooks import HookProblem
    from .prefetch import PrefetchResult
    from .types import ToolOutcome

__all__ = ["CompactionRecord", "CurationReport", "TurnEndNote", "TurnResult", "estimate_tokens",
           "reported_prompt_tokens", "retried_turn"]


def _rough_tokens(text_chars: int) -> int:
    return (text_chars + 3) // 4


def estimate_tokens(
    messages: list[Message], system: str = "", tools: list[dict[str, Any]] | None = None
) -> int:
    """A cheap request-size estimate (4 characters per token) for reports and engine hints.

    Framing per message (4 tokens) and per tool call (12 tokens) matches the default compressor's
    estimator, so a compaction it triggers is never reported as below its threshold."""
    chars = len(system) + (len(json.dumps(tools)) if tools else 0)
    for m in messages:
        chars += len(m.content) + 16
        for call in m.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments, ensure_ascii=False)) + 48
    return _rough_tokens(chars)


@dataclass(slots=True)
class CurationReport:
    """What one review or flush did."""

    kind: Literal["review", "flush"]
    session_id: str
    calls: int = 0  #: model calls made
    writes: list[str] = field(default_factory=list)  #: the successful changes, described
    tools: list[ToolOutcome] = field(default_factory=list)
    error: str | None = None  #: why the model could not be used, if it could not
    timed_out: bool = False  #: the bound passed; a late answer was discarded unapplied
    omitted_messages: int = 0  #: messages left out to fit ``memory.review_input_tokens``
    seconds: float = 0.0

    @property
    def notice(self) -> str | None:
        """``memory updated: ...`` when something was written."""
        return "memory updated: " + "; ".join(self.writes) if self.writes else None


@dataclass(slots=True)
class CompactionRecord:
    """What one compaction did."""

    #: ``server``: the model platform compacted (a compaction block in its response)
    trigger: Literal["auto", "manual", "hygiene", "server"]
    old_session_id: str
    new_session_id: str
    messages_before: int
    messages_after: int
    tokens_before: int  #: the kernel's estimate of the request (history + system prompt + tools)
    tokens_after: int
    engine: str | None
    summary: str | None = None
    notices: list[str] = field(default_factory=list)
    memory_context: str = ""  #: what the providers' on_pre_compress gave the engine
    engine_report: dict[str, Any] | None = None
    seconds: float = 0.0
    #: the pre-compaction memory flush, when one ran
    flush: CurationReport | None = None
    #: the note the plugins' on_post_compress added to the compacted history (e.g. open todos)
    carried_note: str | None = None


@dataclass(slots=True)
class TurnResult:
    """Everything one turn did, for callers, the replay report and tests."""

    reply: str
    session_id: str
    user: Message
    assistant: Message
    prefetch: list[PrefetchResult] = field(default_factory=list)
    recall_block: str = ""
    tools: list[ToolOutcome] = field(default_factory=list)
    compactions: list[CompactionRecord] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    #: the system prompt sent with each LLM call, in order (the same object while unchanged)
    system_prompts: list[str] = field(default_factory=list)
    iterations: int = 0
    budget_exhausted: bool = False
    #: the turn was cancelled (:meth:`Agent.cancel`, or the delegating call gave up on it)
    cancelled: bool = False
    #: characters passed to ``on_text`` (after scrubbing)
    streamed_chars: int = 0
    seconds: float = 0.0
    #: things to show the user that happened since the previous turn's result, e.g.
    #: "memory updated: ..." from a background review or a pre-compaction flush
    notices: list[str] = field(default_factory=list)
    #: whether this turn started a background memory review
    review_started: bool = False
    #: hook implementations that raised, were late or answered the wrong type during this turn,
    #: and background ones (sync_turn, queue_prefetch, ...) of this conversation since the last
    problems: list[HookProblem] = field(default_factory=list)


@dataclass(slots=True)
class TurnEndNote:
    """What one ``on_turn_end`` implementation adds to the turn's result: the kernel merges it
    (an implementation returns it rather than changing the result, which may be gone by the time
    a late one answers)."""

    #: appended, in call order, to :attr:`TurnResult.notices`
    notices: list[str] = field(default_factory=list)
    #: sets :attr:`TurnResult.review_started`
    review_started: bool = False


def reported_prompt_tokens(history: list[Message]) -> int | None:
    """The prompt size of the last model call recorded in ``history`` (its usage meta), if any.

    Messages a compaction carried over keep the usage of a call made before the compaction,
    which says nothing about the compacted history: they end the search.
    """
    for message in reversed(history):
        if message.role == "assistant":
            if "carried_over" in message.meta:
                return None
            usage = Usage.from_meta(message.meta.get("usage"))
            return (usage.prompt_tokens or None) if usage is not None else None
    return None


def retried_turn(history: list[Message], text: str,
                 message_id: str | None) -> tuple[Message | None, Message | None]:
    """A retry of a turn that was cut short: the history's last user message when it is
    ``message_id`` with ``text`` (else ``None``), and the final reply stored after it when the cut
    turn got that far (else ``None``)."""
    if not message_id:
        return None, None
    user = next((m for m in reversed(history) if m.role == "user"), None)
    if user is None or user.content != text or (user.meta or {}).get("message_id") != message_id:
        return None, None
    last = history[-1]
    if last is not user and last.role == "assistant" and not last.tool_calls:
        return user, last
    return user, None
