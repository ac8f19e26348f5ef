"""The ``compressor`` context engine: Hermes' compaction algorithm with its weaknesses fixed.

One compaction (:meth:`Compressor.compact`), built on :mod:`hermes_core.compaction`:

1. plan the cut (``compaction.boundaries``): protected head, protected tail, pinned latest
   request and reply, no tool group split;
2. pass 1 (:mod:`.prune`): clear old tool outputs; if that alone brings the history well under
   the threshold, stop there (no LLM call, nothing summarised);
3. pass 2 (:mod:`.summary`): summarise the middle with the summary model, updating the previous
   summary; on any failure use the deterministic extractive summary (``compaction.fallback``)
   and say so;
4. assemble and repair the result (``compaction.assemble``, ``compaction.repair``).

The input list and its messages are never modified.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from hermes_core import hookimpl
from hermes_core.compaction.assemble import assemble
from hermes_core.compaction.boundaries import Plan
from hermes_core.compaction.errors import ContextOverflowError, check_history
from hermes_core.compaction.fallback import extractive_summary, turn_capacity, user_turn_starts
from hermes_core.compaction.markers import is_standalone_summary, summary_body
from hermes_core.compaction.policy import PolicyEngine
from hermes_core.compaction.redact import redact
from hermes_core.compaction.repair import merge_adjacent_roles, repair_tool_pairs
from hermes_core.compaction.tokens import estimate_text
from hermes_core.errors import ConfigError, HermesCoreError
from hermes_core.kinds import PluginContext
from hermes_core.llm import LLM, LLMError, LLMFailure, run_with_deadline
from hermes_core.models import context_window
from hermes_core.types import CompressionResult, Message

from .config import CompressorConfig
from .platform import COMPACT, PlatformSettings, build_edits
from .prune import clear, prunable, tokens_freed
from .summary import SUMMARY_SYSTEM, build_prompt, serialize_turns, summary_budget

__all__ = ["Compressor", "check_history"]

_DEFAULT: Any = object()
#: tokens the summary prompt's fixed text (instructions, template) takes, rounded up
_PROMPT_OVERHEAD = 1_500
#: below this many tokens of room for the turns, a summary call is not worth making
_MIN_TURNS_INPUT = 1_000
#: the longest pause after consecutive summary failures
_MAX_COOLDOWN = 900.0
#: seconds past summary_timeout before an injected LLM that ignores its timeout is abandoned
_DEADLINE_GRACE = 1.0
_OVERSIZE_MARK = (
    "\n[... {cut} characters of this tool output cut: it alone exceeded the context window ...]\n"
)


@dataclasses.dataclass(slots=True)
class _SummaryOutcome:
    """What the summary pass decided: the (possibly refitted) plan, the summary (``None``: none
    was made), where it came from and the model's failure, if any."""

    plan: Plan
    summary: str | None
    source: str
    failure: LLMError | None


class Compressor(PolicyEngine):
    """Summarises the middle of a long history; see the module docstring."""

    name = "compressor"
    config_section = "compression"
    description = "Clears old tool outputs and summarises the middle of long histories"
    Config = CompressorConfig

    def __init__(
        self,
        config: CompressorConfig,
        context: PluginContext,
        *,
        llm: LLM | None = _DEFAULT,
        window: int | None = None,
    ) -> None:
        super().__init__(config, context, window=window)
        self.settings = config
        core = context.config
        self.summary_model = config.summary_model or core.llm.auxiliary_model or core.llm.model
        self._no_model: str | None = None
        if llm is _DEFAULT:
            # the auxiliary model client (llm.auxiliary_client); its SDK loads on the first summary
            try:
                llm = context.llm("auxiliary")
            except (LLMError, HermesCoreError) as exc:
                llm, self._no_model = None, str(exc)
        self.llm = llm
        self.summary_window = context_window(core, model=self.summary_model, client=llm)
        self._failures = 0
        self._fallback_chars = 8_000
        self._cooldown_until = 0.0
        self._last_failure: LLMError | None = None
        #: why the platform's context management is not in use (None: in use, or not asked for)
        self.platform_off: str | None = None
        if config.platform is not None:
            self._use_platform(config.platform)

    # ---------------------------------------------------------------------------- platform

    def _use_platform(self, settings: PlatformSettings) -> None:
        """Hand the platform's edits to the main model client; the local path stays when it
        cannot. An edit name the client's SDK does not know raises (refused at start)."""
        edits, notes = build_edits(settings)
        for note in notes:
            self.log.warning("compression.platform: %s", note)
        if not edits:
            return
        compact = next((e for e in edits if e["type"] == COMPACT), None)
        if compact is not None and compact["trigger"]["value"] >= self.window:
            raise ConfigError(
                f"compression.platform.compaction_trigger_tokens ({compact['trigger']['value']}) "
                f"is not below the model's context window ({self.window} tokens): the server "
                "would never compact before the window is full; lower it")
        why = ("there is no main model client" if self.client is None
               else self.client.platform_context(edits, self._platform_refused))
        if why is not None:
            self._platform_refused(f"{why}; compression.platform is not used")
            return
        self.policy.platform = "compaction" if any(e["type"] == COMPACT for e in edits) else "editing"
        self.log.info("compression.platform: sending %s", ", ".join(e["type"] for e in edits))

    def _platform_refused(self, why: str) -> None:
        """The platform's context management is off (unsupported or refused): local path."""
        self.policy.platform = None
        self.platform_off = f"{why}; the local compaction runs instead"
        self.log.warning("%s", self.platform_off)
        self.context.report_problem(self.platform_off)

    # ------------------------------------------------------------------------------- hooks

    @hookimpl
    def compress(
        self, messages: list[Message], focus_topic: str | None, memory_context: str
    ) -> CompressionResult:
        return self.with_report(
            self.compact(messages, focus_topic=focus_topic, memory_context=memory_context or ""))

    @hookimpl
    def describe_context(self, messages: list[Message]) -> dict[str, Any]:
        """What a compaction of ``messages`` would keep and summarise (nothing is done)."""
        from .estimate import describe_compaction

        return describe_compaction(self, check_history(messages))

    # ---------------------------------------------------------------------------- planning

    def _fit_oversized(self, messages: list[Message], plan: Plan) -> list[str]:
        """Cut kept tool outputs larger than the window; refuse other oversized messages."""
        notices = []
        limit = self.window
        middle = set(plan.middle)
        for i, cost in enumerate(plan.tokens):
            if cost <= limit or i in middle:
                continue
            message = messages[i]
            if message.role != "tool" or plan.head_end <= i < plan.tail_start:
                if message.role == "tool":
                    continue  # pass 1 clears it
                raise ContextOverflowError(
                    f"message {i} ({message.role}, about {cost} tokens) is larger than the whole "
                    f"context window ({limit} tokens), so no compaction can make room for it. "
                    "Shorten it or split it into smaller messages (or set llm.context_window if "
                    "the model's window is larger); the stored history was not changed."
                )
            keep = max(400, self.tail_budget * 4)
            text = message.content
            head, tail = keep * 2 // 3, keep // 3
            mark = _OVERSIZE_MARK.format(cut=len(text) - head - tail)
            messages[i] = dataclasses.replace(
                message,
                content=text[:head] + mark + text[-tail:],
                meta={**message.meta, "truncated_chars": len(text)},
            )
            plan.tokens[i] = estimate_text(messages[i].content) + 4
            notices.append(
                f"tool output {i} ({message.tool_name or 'tool'}) alone exceeded the context "
                f"window; only its first and last {keep} characters are kept in context"
            )
        return notices

    # --------------------------------------------------------------------------- compaction

    def compact(
        self,
        messages: list[Message],
        *,
        focus_topic: str | None = None,
        memory_context: str = "",
    ) -> CompressionResult:
        """Compact ``messages``; see the module docstring. Never modifies the input."""
        started = time.perf_counter()
        history = check_history(messages)
        self.policy.record_attempt()
        nothing = self._nothing_to_compact(history)
        if nothing is not None:
            return self._finish(history, history, "none", [nothing], summary=None,
                                record=bool(history), started=started)

        plan = self.plan(history)
        notices = self._fit_oversized(history, plan)
        cleared = prunable(history, plan.tail_start, min_chars=self.settings.prune_min_chars)
        outcome = _SummaryOutcome(plan, None, "prune-only" if cleared else "none", None)
        if plan.reason is not None:
            notices.append(f"nothing old enough to summarise: {plan.reason}")
        elif not self._prune_is_enough(plan, cleared):
            outcome = self._summary_pass(history, plan, notices, focus_topic, memory_context)
            if outcome.summary is None:  # on_summary_failure: abort
                return self._finish(history, history, "aborted", notices, summary=None,
                                    record=False, started=started)
            # the middle is summarised from its original text: only kept messages need clearing
            keep = set(range(outcome.plan.head_end)) | set(outcome.plan.pinned)
            cleared = [i for i in cleared if i in keep]
        return self._assembled(history, outcome, cleared, notices, started)

    def _summary_pass(
        self,
        history: list[Message],
        plan: Plan,
        notices: list[str],
        focus_topic: str | None,
        memory_context: str,
    ) -> _SummaryOutcome:
        """Pass 2: summarise the middle (by the model, else extractively); a failure adds its
        notice. The summary is ``None`` only when configured to abort."""
        previous = self._previous_summary(history, plan)
        turns = [m for i in plan.middle if (m := history[i]) and not is_standalone_summary(m)]
        summary, source, failure = self._summarise(
            turns,
            previous=previous,
            focus_topic=focus_topic,
            memory_context=memory_context,
            middle_tokens=plan.tokens_of(plan.middle),
            pinned=bool(plan.pinned),
        )
        kept_turns = 0
        if source == "extractive":
            # Every compacted user turn gets a line in the fallback; the newer turns that do
            # not fit its budget stay verbatim (the middle ends before them).
            plan, kept_turns = self._fit_fallback(history, plan, previous)
            turns = [m for i in plan.middle if (m := history[i]) and not is_standalone_summary(m)]
            assert failure is not None  # the extractive summary stands in for a failed model
            summary = extractive_summary(
                turns, reason=f"the summary model was unavailable ({failure.failure})",
                previous_summary=previous, focus_topic=focus_topic, max_chars=self._fallback_chars)
        if failure is not None:
            notices.append(self._failure_notice(failure, len(turns), source,
                                                user_turns=len(user_turn_starts(turns)),
                                                kept_turns=kept_turns))
        return _SummaryOutcome(plan, summary, source, failure)

    def _assembled(
        self,
        history: list[Message],
        outcome: _SummaryOutcome,
        cleared: list[int],
        notices: list[str],
        started: float,
    ) -> CompressionResult:
        """The compacted history: kept messages (``cleared`` ones cleared), the summary, repaired."""
        plan, summary, source, failure = outcome.plan, outcome.summary, outcome.source, outcome.failure
        pruned = clear(history, cleared)
        meta = {
            "source": source,
            "compacted_messages": len(plan.middle),
            "count": self.policy.compactions_total,
        }
        out = assemble(plan, pruned, summary, summary_meta=meta)
        out, report = repair_tool_pairs(out)
        out, report.turns_merged = merge_adjacent_roles(out)
        notices.extend(report.notices())
        if cleared:
            notices.append(f"cleared {len(cleared)} old tool output(s) (pass 1)")
        hint = (f" (the protected tail alone holds {plan.tail_tokens} tokens in "
                f"{plan.n - plan.tail_start} messages; lower compression.protect_last_n or "
                "compression.target_ratio to let compaction reach further)")
        made = summary is not None
        result = self._finish(
            history, out, source, notices, summary=summary, record=bool(out), hint=hint,
            raw_before=sum(plan.tokens), started=started, summarised=len(plan.middle) if made else 0,
            pinned=len(plan.pinned) if made else 0, cleared=len(cleared),
        )
        if failure is not None and self.last_report is not None:
            self.last_report.failure = f"{failure.failure}: {failure}"
        return result

    def _prune_is_enough(self, plan: Plan, cleared: list[int]) -> bool:
        ratio = self.settings.prune_only_below
        if ratio <= 0:
            return False
        size = sum(plan.tokens) - tokens_freed(plan.tokens, cleared)
        return size + self.policy.overhead_tokens <= ratio * self.threshold_tokens

    def _previous_summary(self, history: list[Message], plan: Plan) -> str | None:
        bodies = [summary_body(history[i]) for i in plan.summaries]
        texts = [b for b in bodies if b]
        return "\n\n".join(texts) if texts else None

    # ----------------------------------------------------------------------------- summary

    def _summarise(
        self,
        turns: list[Message],
        *,
        previous: str | None,
        focus_topic: str | None,
        memory_context: str,
        middle_tokens: int,
        pinned: bool,
    ) -> tuple[str | None, str, LLMError | None]:
        """``(summary, source, failure)``; summary is ``None`` only when configured to abort."""
        s = self.settings
        budget = self._summary_budget(middle_tokens)
        failure = self._precheck()
        if failure is None:
            answer = self._call_model(turns, budget, previous, focus_topic, memory_context, pinned)
            if isinstance(answer, str):
                self._failures = 0
                self._cooldown_until = 0.0
                return answer, "llm", None
            failure = answer
            if failure.failure not in (LLMFailure.WINDOW_TOO_SMALL, LLMFailure.NOT_CONFIGURED):
                # a real call failed: do not hammer the endpoint on the next compaction
                self._failures += 1
                pause = min(_MAX_COOLDOWN, s.failure_cooldown_seconds * 2 ** (self._failures - 1))
                self._cooldown_until = time.monotonic() + pause
                self._last_failure = failure
        if s.on_summary_failure == "abort":
            return None, "aborted", failure
        self._fallback_chars = max(2_000, budget * 4)
        return None, "extractive", failure

    def _fit_fallback(
        self, history: list[Message], plan: Plan, previous: str | None
    ) -> tuple[Plan, int]:
        """``plan`` with the middle ending before the user turns the fallback cannot carry, and
        how many user turns that keeps verbatim (0: it carries them all)."""
        starts = [i for i in plan.middle if history[i].role == "user"
                  and not is_standalone_summary(history[i])]
        capacity = max(1, turn_capacity(self._fallback_chars, previous))
        if len(starts) <= capacity:
            return plan, 0
        new_tail = starts[capacity]
        fitted = dataclasses.replace(
            plan,
            tail_start=new_tail,
            pinned=tuple(i for i in plan.pinned if i < new_tail),
            summaries=tuple(i for i in plan.summaries if i < new_tail),
        )
        return fitted, len(starts) - capacity

    def _summary_budget(self, middle_tokens: int) -> int:
        """The summary's target size for ``middle_tokens`` of compacted content (the settings'
        ``summary_*`` bounds; see :func:`.summary.summary_budget`)."""
        s = self.settings
        return summary_budget(middle_tokens, self.window, ratio=s.summary_ratio,
                              minimum=s.summary_min_tokens, maximum=s.summary_max_tokens,
                              window_fraction=s.summary_window_fraction)

    def _precheck(self) -> LLMError | None:
        """Why no summary call should be made now (no model, cooling down), or ``None``."""
        if self.llm is None:
            return LLMError(
                f"no summary model is configured ({self._no_model or 'no model client'})",
                failure=LLMFailure.NOT_CONFIGURED,
            )
        if time.monotonic() < self._cooldown_until and self._last_failure is not None:
            left = self._cooldown_until - time.monotonic()
            return LLMError(
                f"the summary model failed recently ({self._last_failure}); it is not asked again "
                f"for {left:.0f} s",
                failure=self._last_failure.failure,
            )
        return None

    def _call_model(
        self,
        turns: list[Message],
        budget: int,
        previous: str | None,
        focus_topic: str | None,
        memory_context: str,
        pinned: bool,
    ) -> str | LLMError:
        """The model's summary, or why there is none."""
        s = self.settings
        assert self.llm is not None
        out_tokens = int(budget * 1.25) + 200
        room = min(s.summary_input_max_tokens, self.summary_window - out_tokens - _PROMPT_OVERHEAD)
        room -= estimate_text(previous or "") + min(estimate_text(memory_context), 2_000)
        if room < _MIN_TURNS_INPUT:
            return LLMError(
                f"the summary model's window ({self.summary_window} tokens) is too small for a "
                f"{budget}-token summary plus its input",
                failure=LLMFailure.WINDOW_TOO_SMALL,
            )
        serialized = serialize_turns(
            turns, max_input_tokens=room, per_message_tokens=s.summary_message_max_tokens
        )
        prompt = build_prompt(
            serialized,
            budget=budget,
            previous_summary=previous,
            memory_context=memory_context,
            focus_topic=focus_topic,
            pinned=pinned,
        )
        llm = self.llm
        try:
            # summary_timeout bounds the whole call, the SDK's retries included (the clients
            # budget them); the deadline here also holds an injected LLM to it, with a little
            # grace so the LLM's own, more precise error wins when it keeps the bound.
            text = run_with_deadline(
                lambda: llm.complete(
                    system=SUMMARY_SYSTEM,
                    messages=[Message(role="user", content=prompt)],
                    max_tokens=out_tokens,
                    model=self.summary_model,
                    timeout=s.summary_timeout,
                ),
                s.summary_timeout + _DEADLINE_GRACE,
            )
        except LLMError as exc:
            return exc
        except Exception as exc:  # an injected LLM may raise anything; never lose the middle
            return LLMError(
                f"the summary model raised {type(exc).__name__}: {exc}", failure=LLMFailure.OTHER
            )
        if not isinstance(text, str) or not text.strip():
            return LLMError("the summary model answered with no text", failure=LLMFailure.EMPTY)
        return redact(text.strip())

    def _failure_notice(
        self, failure: LLMError, count: int, source: str, *, user_turns: int = 0,
        kept_turns: int = 0,
    ) -> str:
        if source == "aborted":
            return (
                f"the summary model failed ({failure.failure}: {failure}); compaction was aborted "
                "and the history left unchanged (compression.on_summary_failure is 'abort')"
            )
        kept = (
            f"; the {kept_turns} newer user turn(s) that did not fit its budget were kept "
            "verbatim" if kept_turns else ""
        )
        return (
            f"the summary model failed ({failure.failure}: {failure}); {count} earlier message(s) "
            "were replaced by a deterministic extractive summary instead, with one line for each "
            f"of their {user_turns} user turn(s) (who asked what, decisions, files, errors) and "
            f"the commands, errors and values found{kept}. Nothing was dropped without a summary"
        )

