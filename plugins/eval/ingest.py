"""Ingesting a benchmark haystack through the real plugin stack, the way ``hermes-core replay`` does.

Each haystack session becomes one kernel session (``Agent.new_session`` between them, so the
providers see ``on_session_end`` and ``on_session_switch``); each user turn goes through
``Agent.run_turn`` (``on_message``, prefetch, the context engine, ``sync_turn`` and
``queue_prefetch`` on the background worker), and the worker is settled after every turn.

The model's words are the only fake part, and they are the dataset's own: the reply to a user turn
is the haystack's next assistant turn, served by :class:`~hermes_core.replay.ReplayLLM` (the
replay's scripted model). Folding the turns into (user, reply) pairs:

* consecutive assistant turns are joined (blank line between) into one reply;
* a user turn followed by another user turn gets an empty reply;
* assistant turns before the session's first user turn cannot be sent through a turn; they are
  skipped and counted (``skipped_turns``). LongMemEval sessions start with the user; in LoCoMo the
  session's first speaker plays the user and every line carries its speaker's name.

Settling: after the last turn the kernel's worker is flushed, then each provider that does work on
its own threads or a server is waited for (:func:`settle_providers`), each within
``settle_timeout``; what does not finish in time fails the case's questions ("ingest: ...").

Dates: every turn runs with :mod:`hermes_core.clock` pinned to its session's date (plus 30 s per
turn), so messages and sessions are stamped with the haystack's time, not today's; the session
also carries ``eval_session`` (the dataset's session id) and ``eval_date`` in its attributes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hermes_core import clock
from hermes_core.replay import RecordedResponse, ReplayLLM, Transcript, TranscriptTurn, iter_replay

if TYPE_CHECKING:
    from hermes_core.agent import Agent

    from .datasets import Case, HaystackSession

__all__ = ["IngestReport", "ingest_case", "pair_turns", "settle_providers"]

#: instance methods a provider may offer to wait (bounded) for its own background work
SETTLE_METHODS = ("settle", "wait_idle")

#: seconds between two turns of one session on the pinned clock
TURN_SPACING = 30.0


@dataclass
class IngestReport:
    sessions: int = 0
    turns: int = 0
    skipped_turns: int = 0
    seconds: float = 0.0
    #: kernel session id -> dataset session id (compaction children included)
    session_map: dict[str, str] = field(default_factory=dict)
    #: errors logged by plugins while ingesting (a provider raised, a write failed, ...)
    problems: list[str] = field(default_factory=list)
    #: the background worker did not finish within its bound
    unsettled: bool = False


class _Tap(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


def pair_turns(session: HaystackSession) -> tuple[list[tuple[str, str]], int]:
    """The session as (user, reply) pairs, and how many leading assistant turns were skipped."""
    pairs: list[tuple[str, str]] = []
    skipped = 0
    replies: list[str] = []
    for turn in session.turns:
        if turn.role == "user":
            if pairs:
                pairs[-1] = (pairs[-1][0], "\n\n".join(replies))
            replies = []
            pairs.append((_spoken(turn.content, turn.speaker), ""))
        elif not pairs:
            skipped += 1
        else:
            replies.append(_spoken(turn.content, turn.speaker))
    if pairs:
        pairs[-1] = (pairs[-1][0], "\n\n".join(replies))
    return pairs, skipped


def _spoken(text: str, speaker: str | None) -> str:
    return f"{speaker}: {text}" if speaker else text


def ingest_case(case: Case, agent: Agent, llm: ReplayLLM, writes: list[Any], *,
                settle_timeout: float = 120.0) -> IngestReport:
    """Send ``case``'s haystack through ``agent`` (built with ``llm``), in date order.

    The agent is left open (the caller asks its questions on the same host, then closes it).
    """
    report = IngestReport()
    plan: list[tuple[HaystackSession, int, TranscriptTurn]] = []
    line = 0
    for session in case.sessions_in_date_order():
        pairs, skipped = pair_turns(session)
        report.skipped_turns += skipped
        for index, (user, reply) in enumerate(pairs):
            line += 1
            turn = TranscriptTurn(line, user, [RecordedResponse(line, reply, [])],
                                  new_session=index == 0 and bool(plan))
            plan.append((session, index, turn))
    transcript = Transcript(case.id, {"case": case.id}, [t for _s, _i, t in plan])
    tap = _Tap()
    root = logging.getLogger("hermes_core")
    root.addHandler(tap)
    started = time.perf_counter()
    try:
        records = iter_replay(transcript, agent, llm, writes, settle=True)
        for session, index, _turn in plan:
            if index == 0:
                report.sessions += 1
                if report.sessions == 1 and session.date is not None:
                    # the first session was created with the agent, before the clock was pinned
                    agent.session.started_at = session.date.timestamp()
                # copied into the next session by Agent.new_session (see the module docstring)
                agent.session.attributes = {**agent.session.attributes, "eval_session": session.id,
                                            "eval_date": session.date_text}
            when = session.date + timedelta(seconds=TURN_SPACING * index) if session.date else None
            with clock.frozen_at(when):
                record = next(records)
            report.turns += 1
            report.session_map[record["session_id"]] = session.id
            for c in record["compactions"]:
                report.session_map[c["old_session_id"]] = report.session_map.get(
                    c["old_session_id"], session.id)
                report.session_map[c["new_session_id"]] = session.id
        report.unsettled = not agent.worker.flush(agent.worker.drain_timeout)
        if not report.unsettled:
            late = settle_providers(agent.host.instances, settle_timeout)
            report.problems += [f"provider {name}: its own background work did not finish within "
                                f"{settle_timeout:g} s" for name in late]
    finally:
        root.removeHandler(tap)
    report.seconds = time.perf_counter() - started
    report.problems = tap.lines + report.problems
    return report


def settle_providers(instances: dict[str, object], timeout: float) -> list[str]:
    """Wait for providers that do work on their own threads or on a server; returns the late ones.

    Duck-typed, like the agent's optional engine methods: an active memory provider with a
    ``settle(timeout) -> bool`` (or ``wait_idle(timeout) -> bool``) method is asked to finish what
    the kernel's worker handed it, within ``timeout`` seconds, so the questions see every stored
    turn. A provider without one is settled when its hooks return.
    """
    late = []
    for key, instance in instances.items():
        if not key.startswith("memory-provider:"):
            continue
        for method in SETTLE_METHODS:
            fn = getattr(instance, method, None)
            if callable(fn):
                try:
                    done = fn(timeout)
                except Exception as exc:
                    logging.getLogger("hermes_core.eval").error("provider %s: %s() raised %s: %s",
                                                                key, method, type(exc).__name__, exc)
                    done = False
                if done is False:
                    late.append(key.split(":", 1)[1])
                break
    return late
