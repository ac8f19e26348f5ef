"""What a compaction would do to a history, without doing it: the compressor's answer to
``describe_context`` (``hermes-core context show`` / ``context estimate``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_core.models import window_source
from hermes_core.types import Message

from .prune import prunable, tokens_freed

if TYPE_CHECKING:
    from .engine import Compressor

__all__ = ["describe_compaction", "plan_lines"]

def _span(first: int, end: int) -> dict[str, Any]:
    return {"first": first, "last": end - 1, "messages": max(0, end - first)} if end > first else {
        "first": None, "last": None, "messages": 0}


def describe_compaction(engine: Compressor, messages: list[Message]) -> dict[str, Any]:
    """Token estimate, threshold, and what a compaction of ``messages`` would keep."""
    plan = engine.plan(messages)
    total = sum(plan.tokens) + engine.overhead_tokens
    cleared = prunable(messages, plan.tail_start, min_chars=engine.settings.prune_min_chars)
    kept = set(plan.kept)
    kept_tokens = plan.tokens_of(sorted(kept)) - tokens_freed(plan.tokens, kept.intersection(cleared))
    middle_tokens = plan.tokens_of(plan.middle)
    s = engine.settings
    budget = engine._summary_budget(middle_tokens) if plan.middle and plan.reason is None else 0
    report: dict[str, Any] = {
        "engine": engine.name,
        "messages": len(messages),
        "tokens": total,
        "context_window": engine.window,
        "context_window_source": window_source(engine.context.config, client=engine.client),
        "threshold": s.threshold,
        "threshold_tokens": engine.threshold_tokens,
        "over_threshold": total >= engine.threshold_tokens,
        "usage_percent": round(100.0 * total / engine.window, 1),
        "compaction": {
            "head": {**_span(0, plan.head_end), "tokens": plan.head_tokens},
            "pinned": {"indices": list(plan.pinned), "tokens": plan.tokens_of(plan.pinned)},
            "middle": {
                **_span(plan.head_end, plan.tail_start),
                "summarised": len(plan.middle),
                "tokens": middle_tokens,
            },
            "tail": {**_span(plan.tail_start, plan.n), "tokens": plan.tail_tokens},
            "old_tool_outputs_cleared": len(cleared),
            "summary_budget_tokens": budget,
            "tokens_after_estimate": kept_tokens + budget + engine.overhead_tokens,
            "nothing_to_compact": plan.reason,
        },
    }
    report["lines"] = plan_lines(report)
    return report


def _line(label: str, part: dict[str, Any]) -> str:
    if not part.get("messages"):
        return f"  {label:<8} none"
    return (
        f"  {label:<8} messages {part['first']}-{part['last']} ({part['messages']}), "
        f"{part['tokens']} tokens"
    )


def plan_lines(report: dict[str, Any]) -> list[str]:
    """The human-readable report of :func:`describe_compaction`'s plan."""
    c = report["compaction"]
    state = "over" if report["over_threshold"] else "under"
    lines = [
        f"engine {report['engine']}: {report['messages']} messages, about {report['tokens']} "
        f"tokens ({report['usage_percent']}% of a {report['context_window']}-token window, from "
        f"{report['context_window_source']})",
        f"threshold {report['threshold']} = {report['threshold_tokens']} tokens: {state} it",
    ]
    if c["nothing_to_compact"]:
        return [*lines, f"a compaction would change nothing: {c['nothing_to_compact']}"]
    lines += ["a compaction would keep:", _line("head", c["head"])]
    pins = c["pinned"]
    if pins["indices"]:
        lines.append(f"  {'pinned':<8} messages {pins['indices']}, {pins['tokens']} tokens")
    lines.append(_line("tail", c["tail"]))
    middle = c["middle"]
    lines.append(
        f"and summarise {middle['summarised']} messages ({middle['tokens']} tokens) into about "
        f"{c['summary_budget_tokens']} tokens, clearing {c['old_tool_outputs_cleared']} old tool "
        f"output(s): about {c['tokens_after_estimate']} tokens after"
    )
    return lines
