"""The context engine's pass of a compaction, apart from the agent's state.

:meth:`Agent._compact <hermes_core.agent.Agent>` takes the history, asks the providers what must
survive (``on_pre_compress``), lets the engine compress (``compress``), merges the plugins'
working-state notes into the result (``on_post_compress``), and only then moves the conversation
into a child session. The middle part, which reads the host's hooks and returns data, lives here;
the session change stays with the agent, which owns the session.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import deprecations
from .compaction.repair import merge_adjacent_roles, repair_tool_pairs
from .fence import provider_text
from .models import context_window
from .types import Message

if TYPE_CHECKING:
    from .host import PluginHost
    from .llm import ChatLLM
    from .results import CurationReport
    from .types import Session

__all__ = ["HYGIENE_RATIO", "EnginePass", "carry_over", "engine_pass", "engine_report",
           "over_hygiene_line", "place_note", "server_pass"]

log = logging.getLogger("hermes_core.agent")
#: a resumed history above this share of the model's window is compacted before the first turn
HYGIENE_RATIO = 0.85


@dataclass(slots=True)
class EnginePass:
    """What the engine and the providers made of a history: the compacted messages and what the
    compaction record reports about them."""

    after: list[Message]
    engine: str | None
    summary: str | None
    notices: list[str] = field(default_factory=list)
    memory_context: str = ""
    carried_note: str | None = None
    report: dict[str, Any] | None = None
    flush: CurationReport | None = None


def engine_pass(host: PluginHost, session: Session, before: list[Message],
                focus_topic: str | None, flush: CurationReport | None) -> EnginePass | None:
    """on_pre_compress -> compress -> on_post_compress over ``before``; ``None`` when the engine
    made no change (no engine answered, it failed, it returned nothing or the same messages)."""
    pieces = []
    for outcome in host.hooks.on_pre_compress(messages=before, session=session):
        text = provider_text(outcome.value, plugin=outcome.plugin, hook="on_pre_compress")
        if text and outcome.ok:
            pieces.append(f"## {host.instance_name(outcome.plugin)}\n{text}")
    memory_context = "\n\n".join(pieces)
    compressed = host.hooks.compress(session=session, messages=before, focus_topic=focus_topic,
                                     memory_context=memory_context)
    if compressed is None:
        return None  # no engine answered (or it failed: recorded as a problem of the turn)
    if not compressed.messages:
        log.error("the context engine's compress returned an empty history; it was kept as it was")
        return None
    engine = host.engine
    name = host.pm.get_name(engine) if engine is not None else None
    notices = list(compressed.notices)
    for notice in notices:
        log.warning("compaction: %s", notice)
    after = list(compressed.messages)
    if len(after) == len(before) and all(a is b for a, b in zip(after, before, strict=True)):
        return None  # no progress: keep the session and the prompt as they are
    # Whatever the engine returned must be sendable: a tool result without its call (an engine
    # that kept only roles and texts), a call without its result, two turns of one role in a row
    # would make every later request of the conversation fail. Repaired, and said.
    after, repaired = repair_tool_pairs(after)
    after, repaired.turns_merged = merge_adjacent_roles(after)
    for notice in repaired.notices():
        log.warning("compaction: the engine's history was repaired: %s", notice)
        notices.append(f"the engine's history was repaired: {notice}")
    # Working state a summary may blur (open todo items) joins the user side (on_post_compress).
    after, carried_note = carry_over(host, after, session)
    report = (engine_report(compressed.report, name) if compressed.report is not None
              else deprecations.engine_last_report(engine))
    return EnginePass(after, name, compressed.summary, notices, memory_context, carried_note,
                      report, flush)


def place_note(messages: list[Message], note: str) -> list[Message]:
    """``messages`` with ``note`` merged into a user-side message, so roles still alternate.

    A history ending with a tool result gets the note on that result (like the iteration
    budget's notes); otherwise the note opens the last user message (the real request stays
    last). Only the copy in the returned list changes. With no user message at all, the note
    becomes the first message."""
    out = list(messages)
    if out and out[-1].role == "tool":
        last = out[-1]
        out[-1] = dataclasses.replace(last, content=f"{last.content}\n\n{note}",
                                      meta={**last.meta, "carry_over_note": True})
        return out
    for index in range(len(out) - 1, -1, -1):
        if out[index].role == "user":
            original = out[index]
            out[index] = dataclasses.replace(original, content=f"{note}\n\n{original.content}",
                                             meta={**original.meta, "carry_over_note": True})
            return out
    return [Message("user", note, meta={"carry_over_note": True}), *out]


def carry_over(host: PluginHost, messages: list[Message],
               session: Session) -> tuple[list[Message], str | None]:
    """Ask every ``on_post_compress`` implementation for its note; return the compacted history
    with the joined notes merged in (:func:`place_note`), and the notes (``None`` if none)."""
    texts = [provider_text(o.value, plugin=o.plugin, hook="on_post_compress")
             for o in host.hooks.on_post_compress(messages=messages, session=session)
             if o.ok and o.value is not None]
    note = "\n\n".join(t for t in texts if t) or None
    return (place_note(messages, note) if note else messages), note


def engine_report(report: object, engine: str | None) -> dict[str, Any] | None:
    """``CompressionResult.report`` as JSON-able data; a wrong type is logged, not dropped silently."""
    if report is None:
        return None
    if isinstance(report, dict):
        try:
            json.dumps(report)
        except (TypeError, ValueError) as exc:
            log.error("context engine %s: CompressionResult.report is not JSON-serialisable (%s); "
                      "it was left out of the compaction record", engine, exc)
            return None
        return dict(report)
    log.error("context engine %s: CompressionResult.report must be a dict, not %s; it was left "
              "out of the compaction record", engine, type(report).__name__)
    return None


def server_pass(request: Message, block: dict[str, Any]) -> EnginePass:
    """What the model platform's own compaction (a compaction block opening the response) leaves:
    everything before this turn's request stays archived in the old session; the child session
    holds the request, and the response (with its block) joins it next."""
    return EnginePass([request], None, block.get("content"), [
        "Context compaction: the model platform compacted the earlier turns (server-side "
        "compaction)."])


def over_hygiene_line(host: PluginHost, llm: ChatLLM, session: Session, tokens: int) -> bool:
    """Whether a resumed history of ``tokens`` is above :data:`HYGIENE_RATIO` of the window."""
    window = context_window(host.config.core, client=llm)
    if tokens <= HYGIENE_RATIO * window:
        return False
    log.info("resumed session %s holds ~%d tokens of a %d-token window; compacting it before the "
             "turn", session.id, tokens, window)
    return True
