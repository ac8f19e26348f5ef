"""When to compact, how often, and when to stop trying: shared by both first-party engines.

:class:`CompactionPolicy` holds the counters; :class:`PolicyEngine` is a
:class:`~hermes_core.kinds.ContextEngine` base that implements ``should_compress`` and
``update_from_response`` with it and gives the agent loop plain methods: :meth:`begin_turn`,
:meth:`preflight` and :meth:`compact`.

The loop guards fix Hermes' compaction loops (a history that fits the tail, or a system prompt
and tool list too big to compact away, re-triggered compaction every turn):

* at most ``max_per_turn`` compactions per turn;
* a compaction that leaves the history over the threshold arms a *back-off*: no automatic
  compaction until the history has grown by a margin (4,096 tokens or 5% of the threshold,
  doubling per consecutive ineffective compaction). The next real usage report confirms or
  clears it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from hermes_core import hookimpl
from hermes_core.kinds import ContextEngine, PluginContext
from hermes_core.models import context_window
from hermes_core.types import CompressionResult, Message, Session, SwitchReason, Usage

from .boundaries import Plan, plan_compaction
from .errors import check_history
from .tokens import estimate_message, estimate_messages

__all__ = ["CompactionPolicy", "CompactionReport", "MemoryContext", "PolicyEngine"]

log = logging.getLogger(__name__)

#: what ``preflight`` accepts as memory context: the text, or a function of the history
MemoryContext = str | Callable[[list[Message]], str]


@dataclass(slots=True)
class CompactionReport:
    """What the last compaction did (for the kernel's status line and the CLI)."""

    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    #: ``llm``, ``extractive``, ``prune-only``, ``archived``, ``none`` or ``aborted``
    source: str
    summarised: int = 0
    pinned: int = 0
    cleared_tool_outputs: int = 0
    failure: str | None = None
    seconds: float = 0.0
    notices: list[str] = field(default_factory=list)


#: the share of the threshold from which a history is counted by the model client (when it can)
COUNT_BAND = 0.8


class CompactionPolicy:
    """Thresholds and loop guards; knows nothing about how a history is compacted."""

    def __init__(
        self, *, window: int, threshold: float, max_per_turn: int, enabled: bool = True,
        counter: Callable[[list[Message]], int | None] | None = None,
    ) -> None:
        self.window = window
        #: the model client's exact count of a history, or None (see :meth:`tokens`)
        self.counter = counter
        self.threshold = threshold
        self.threshold_tokens = max(1, int(window * threshold))
        self.max_per_turn = max_per_turn
        self.enabled = enabled
        #: tokens the kernel adds around the history (system prompt, tool schemas); set by it
        self.overhead_tokens = 0
        #: the platform's context management in use (``compression.platform``): ``None`` (the
        #: local path only), ``"editing"`` (the server clears old tool results, so its figures
        #: are trusted over the local estimate of the uncleared history) or ``"compaction"``
        #: (the server compacts: no automatic local compaction)
        self.platform: str | None = None
        self.reset()

    def begin_turn(self) -> None:
        self.compactions_this_turn = 0

    def reset(self) -> None:
        """Forget everything about the previous session."""
        self.compactions_this_turn = 0
        self.compactions_total = 0
        self.ineffective = 0
        #: while armed, automatic compaction waits until the history reaches this size
        self.backoff_until: int | None = None
        #: the last usage the model reported (``record_usage``)
        self.last_usage: Usage | None = None
        #: a compaction happened after the last usage report, so that report is stale
        self.usage_stale = False

    def tokens(self, messages: list[Message], prompt_tokens: int | None = None) -> int:
        """The best available size of the next prompt: the model's last reported usage when it is
        fresh (at least the local estimate), else the local estimate; near the threshold
        (``COUNT_BAND`` of it and above) the model client's exact count replaces the estimate
        when the client has one (a network call, so only where the verdict may change; the
        client caches counts by prompt).

        With the platform's context management (:attr:`platform`) the size is the one the server
        will see after its edits: its count near the threshold, else its last usage report as
        it is, else (nothing from the server yet) the local estimate."""
        estimate = estimate_messages(messages) + self.overhead_tokens
        reported = int(prompt_tokens) if prompt_tokens and not self.usage_stale else None
        if reported is not None and self.platform is None:
            return max(reported, estimate)
        if self.counter is not None and estimate >= COUNT_BAND * self.threshold_tokens:
            counted = self.counter(messages)
            if counted:
                return int(counted) + self.overhead_tokens
        return estimate if reported is None else reported

    def blocked_reason(self, tokens: int) -> str | None:
        """Why an automatic compaction must not run now, or ``None``."""
        if self.compactions_this_turn >= self.max_per_turn:
            return f"already compacted {self.compactions_this_turn} time(s) this turn"
        if self.backoff_until is not None and tokens < self.backoff_until:
            return (
                f"backing off after an ineffective compaction until the history reaches "
                f"{self.backoff_until} tokens"
            )
        return None

    def should_compress(self, messages: list[Message], prompt_tokens: int | None) -> bool:
        if not self.enabled or not messages or self.platform == "compaction":
            return False
        tokens = self.tokens(messages, prompt_tokens)
        if tokens < self.threshold_tokens:
            return False
        reason = self.blocked_reason(tokens)
        if reason is not None:
            log.info("compaction skipped (%d tokens >= %d): %s", tokens, self.threshold_tokens, reason)
            return False
        return True

    def record_attempt(self) -> None:
        self.compactions_this_turn += 1
        self.compactions_total += 1
        self.usage_stale = True

    def margin(self) -> int:
        base = max(4_096, self.threshold_tokens // 20)
        return int(base * 2 ** max(0, self.ineffective - 1))

    def record_result(self, tokens_after: int) -> str | None:
        """Arm or clear the back-off; returns a notice when the compaction was not enough."""
        if tokens_after < self.threshold_tokens:
            self.ineffective = 0
            self.backoff_until = None
            return None
        self.ineffective += 1
        self.backoff_until = tokens_after + self.margin()
        return (
            f"the compacted history is still about {tokens_after} tokens, over the "
            f"{self.threshold_tokens}-token threshold; automatic compaction pauses until it "
            f"grows past {self.backoff_until} tokens"
        )

    def record_usage(self, usage: Usage) -> None:
        self.last_usage = usage
        prompt = usage.prompt_tokens
        if prompt <= 0:
            return  # the provider reported no usage: keep the estimate-based verdict
        if prompt < self.threshold_tokens:
            self.ineffective = 0
            self.backoff_until = None
        elif self.usage_stale and self.backoff_until is None:
            # the first real reading after a compaction is still over: the floor (system prompt,
            # tools, protected tail) cannot be compacted away, so do not retry at once
            self.ineffective += 1
            self.backoff_until = prompt + self.margin()
        self.usage_stale = False


class PolicyEngine(ContextEngine):
    """A context engine base: the policy hooks and the agent loop's plain methods.

    Subclasses implement :meth:`compact` (and mark a ``compress`` hookimpl that calls it).
    ``window`` overrides the context window (default: :func:`hermes_core.models.context_window`
    of the kernel config).
    """

    def __init__(self, config: BaseModel, context: PluginContext, *, window: int | None = None) -> None:
        super().__init__(config, context)
        self.log = context.logger
        self.client = _main_client(context)
        self.window = int(window or context_window(context.config, client=self.client))
        settings: Any = config
        self.policy = CompactionPolicy(
            window=self.window,
            threshold=float(settings.threshold),
            max_per_turn=int(getattr(settings, "max_per_turn", 3)),
            enabled=bool(getattr(settings, "enabled", True)),
            counter=self._count if self.client is not None else None,
        )
        self.max_passes = int(getattr(settings, "max_passes", 3))
        #: the protected tail's token budget (``threshold x target_ratio`` of the window)
        ratio = float(getattr(settings, "target_ratio", 0.2))
        self.tail_budget = max(1, int(self.threshold_tokens * ratio))
        self.last_report: CompactionReport | None = None

    def _count(self, messages: list[Message]) -> int | None:
        """The main model client's count of ``messages`` (history only), or None."""
        try:
            counted = self.client.count_tokens(system="", messages=messages, tools=None,
                                               model=self.context.config.llm.model)
            return int(counted) if counted else None
        except Exception:
            self.log.debug("count_tokens raised; using the local estimate", exc_info=True)
            return None

    # ----------------------------------------------------------------------- properties

    @property
    def threshold_tokens(self) -> int:
        return self.policy.threshold_tokens

    @property
    def overhead_tokens(self) -> int:
        return self.policy.overhead_tokens

    @overhead_tokens.setter
    def overhead_tokens(self, value: int) -> None:
        """The kernel sets the size of what surrounds the history (system prompt, tools)."""
        self.policy.overhead_tokens = max(0, int(value))

    # ------------------------------------------------------------------------------- hooks

    @hookimpl
    def should_compress(self, messages: list[Message], prompt_tokens: int | None) -> bool:
        return self.policy.should_compress(messages, prompt_tokens)

    @hookimpl
    def update_from_response(self, usage: Usage) -> None:
        self.policy.record_usage(usage)

    @hookimpl
    def on_session_switch(
        self, new_session: Session, old_session: Session | None, reason: SwitchReason
    ) -> None:
        # A compaction's child session continues the same conversation: keep the counters.
        if reason != SwitchReason.COMPRESSION:
            self.reset()

    @hookimpl
    def on_turn_start(self, session: Session) -> None:
        self.begin_turn()

    @hookimpl
    def on_prompt_assembled(self, session: Session, overhead_tokens: int) -> None:
        self.overhead_tokens = overhead_tokens

    def with_report(self, result: CompressionResult) -> CompressionResult:
        """``result`` carrying :attr:`last_report` as its ``report`` (for the kernel's record)."""
        if self.last_report is None:
            return result
        return dataclasses.replace(result, report=dataclasses.asdict(self.last_report))

    def status(self, messages: list[Message]) -> dict[str, Any]:
        """The engine's figures for ``messages`` (``describe_context`` reports them too)."""
        tokens = self.policy.tokens(messages)
        return {
            "engine": self.name,
            "tokens": tokens,
            "threshold_tokens": self.threshold_tokens,
            "context_window": self.window,
            "usage_percent": round(min(100.0, 100.0 * tokens / self.window), 1),
            "compactions_total": self.policy.compactions_total,
            "compactions_this_turn": self.policy.compactions_this_turn,
            "backoff_until": self.policy.backoff_until,
        }

    # ----------------------------------------------------------------- compaction helpers

    def plan(self, messages: Sequence[Message]) -> Plan:
        """Where a compaction of ``messages`` would cut (no side effects); the settings need
        the protection keys of :class:`~.settings.CompactionSettings`."""
        history = check_history(messages)
        settings: Any = self.config
        return plan_compaction(history, [estimate_message(m) for m in history],
                               protect_first_n=settings.protect_first_n,
                               protect_last_n=settings.protect_last_n, tail_budget=self.tail_budget)

    @staticmethod
    def _nothing_to_compact(history: list[Message]) -> str | None:
        """The notice for a history that is empty or only system messages, else ``None``."""
        if any(m.role != "system" for m in history):
            return None
        return f"nothing to compact, the history is {'only the system prompt' if history else 'empty'}"

    def _finish(
        self,
        before: list[Message],
        after: list[Message],
        source: str,
        notices: list[str],
        *,
        summary: str | None,
        record: bool,
        always_warn: bool = False,
        hint: str = "",
        raw_before: int | None = None,
        started: float | None = None,
        summarised: int = 0,
        pinned: int = 0,
        cleared: int = 0,
    ) -> CompressionResult:
        """The result of one compaction, and :attr:`last_report` for it.

        ``record`` hands the size after it to the loop guards; their notice (the history is
        still over the threshold, followed by ``hint``) is added when the history was over the
        threshold before too, or ``always_warn``. ``raw_before`` is the history's token count
        when the caller has it; every notice gets the ``Context compaction:`` prefix.
        """
        raw = estimate_messages(before) if raw_before is None else raw_before
        tokens_before = raw + self.policy.overhead_tokens
        tokens_after = estimate_messages(after) + self.policy.overhead_tokens
        extra = self.policy.record_result(tokens_after) if record else None
        if extra is not None and (always_warn or tokens_before >= self.threshold_tokens):
            notices.append(extra + hint)
        notices = [n if n.startswith("Context compaction") else f"Context compaction: {n}."
                   for n in notices]
        self.last_report = CompactionReport(
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            messages_before=len(before),
            messages_after=len(after),
            source=source,
            summarised=summarised,
            pinned=pinned,
            cleared_tool_outputs=cleared,
            seconds=0.0 if started is None else time.perf_counter() - started,
            notices=list(notices),
        )
        return CompressionResult(messages=list(after), summary=summary, notices=notices)

    # -------------------------------------------------------------------- the loop's methods

    def compact(
        self,
        messages: list[Message],
        *,
        focus_topic: str | None = None,
        memory_context: str = "",
    ) -> CompressionResult:
        raise NotImplementedError

    def begin_turn(self) -> None:
        """Call at the start of every user turn: resets the per-turn compaction count."""
        self.policy.begin_turn()

    def reset(self) -> None:
        """Forget the previous session's counters and back-off (``/new``, ``/reset``)."""
        self.policy.reset()

    def preflight(
        self,
        messages: list[Message],
        *,
        memory_context: MemoryContext = "",
        focus_topic: str | None = None,
    ) -> CompressionResult | None:
        """Compact before a turn whose history is already over the threshold.

        Up to ``max_passes`` passes, stopping as soon as the history is under the threshold, a
        pass does not shrink it, or a guard blocks. ``memory_context`` may be a function of the
        history (the kernel's ``on_pre_compress`` fan-out), called once per pass. Returns the
        last successful result (notices of every pass included) or ``None`` when nothing changed.
        """
        current = list(messages)
        result: CompressionResult | None = None
        notices: list[str] = []
        started = time.perf_counter()
        for _ in range(self.max_passes):
            if not self.policy.should_compress(current, None):
                break
            before = estimate_messages(current)
            context = memory_context(current) if callable(memory_context) else memory_context
            attempt = self.compact(current, focus_topic=focus_topic, memory_context=context)
            notices.extend(n for n in attempt.notices if n not in notices)
            if estimate_messages(attempt.messages) >= before:
                break  # no progress: another pass would do the same
            current = attempt.messages
            result = attempt
        if result is None:
            for notice in notices:
                self.log.warning("%s", notice)
            return None
        self.log.info("pre-flight compaction took %.1f ms", 1000 * (time.perf_counter() - started))
        return CompressionResult(messages=current, summary=result.summary, notices=notices)


def _main_client(context: PluginContext) -> Any:
    """The main model client of ``context`` (its window and token counts), or None without one."""
    try:
        return context.llm("main")
    except Exception:  # built by hand, or an unknown llm.client (reported at start)
        return None
