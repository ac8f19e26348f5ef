"""The extractive fallback carries every compacted user turn, and its notice is true (issue 17
item 7); the summary call's timeout bounds the whole call, retries included.

The summariser is the real AnthropicLLM (real anthropic SDK) talking to the loopback Messages API
server, which scripts each failure: HTTP 429/500/502/529/401/400, an empty and a blank answer, a
body that is not JSON, a reset connection, a truncated body, a slow answer, a dead port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from compressor_support import build_history, make_context

from hermes_core.compaction.fallback import (
    MIN_TURN_LINE,
    extractive_summary,
    turn_capacity,
)
from hermes_core.compaction.markers import is_summary_message
from hermes_core.compaction.repair import history_problems
from hermes_core.plugins.context_engine.compressor import Compressor, CompressorConfig
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.testing import Broken, Failure, MessagesAPIServer, Reply
from hermes_core.types import Message, ToolCall

MODES: list[tuple[str, Any]] = [
    ("429", Failure(429, "slow down")),
    ("500", Failure(500)),
    ("502", Failure(502)),
    ("529", Failure(529)),
    ("401", Failure(401)),
    ("400", Failure(400, "prompt is too long")),
    ("empty", Reply()),
    ("blank", Reply(text=" \n\t")),
    ("malformed", Broken("malformed")),
    ("reset", Broken("reset")),
    ("truncated", Broken("truncated")),
    ("timeout", Reply(text="too late", delay=5)),
]


def carried_share(original: list[Message], result_messages: list[Message]) -> tuple[int, int]:
    """(carried, compacted): user turns of ``original`` that left the context, and how many of
    them the summary still names (by the start of their request)."""
    kept = {id(m) for m in result_messages}
    (summary,) = [m for m in result_messages if is_summary_message(m)]
    text = " ".join(summary.content.split())
    compacted = [m for m in original if m.role == "user" and id(m) not in kept]
    carried = sum(1 for m in compacted if " ".join(m.content.split())[:24] in text)
    return carried, len(compacted)


def make(home: Path, api: MessagesAPIServer, *, window: int = 60_000, **settings: Any) -> Compressor:
    settings.setdefault("prune_only_below", 0)
    settings.setdefault("summary_timeout", 2.0)
    llm = AnthropicLLM(api_key="k", base_url=api.base_url, model="claude-test", max_retries=2)
    return Compressor(CompressorConfig(**settings),
                      make_context(home, window=window, model="claude-test"), llm=llm)


def incident_history(turns: int) -> list[Message]:
    """Many short user turns with decisions, paths and errors in between (like a long incident)."""
    out: list[Message] = []
    for n in range(turns):
        out.append(Message("user", f"step {n:03d}: check the router for depot {n} and report"))
        out.append(Message("assistant", f"Looking at depot {n}.", tool_calls=[
            ToolCall(f"c{n}", "read_file", {"path": f"router/depots/depot_{n}.py"})]))
        body = f"def route_{n}(): ..." if n % 5 else f"Traceback\nKeyError: 'depot_{n}'"
        out.append(Message("tool", body + " filler" * 200, tool_call_id=f"c{n}",
                           tool_name="read_file"))
        out.append(Message("assistant", f"We decided to cache depot {n} routes instead of "
                                        "recomputing them. " + "detail " * 60))
    return out


@pytest.mark.parametrize(("mode", "item"), MODES, ids=[m for m, _ in MODES])
def test_every_compacted_user_turn_is_carried_in_each_failure_mode(
    tmp_path: Path, mode: str, item: Any
) -> None:
    history = incident_history(61)
    with MessagesAPIServer(default=item) as api:
        engine = make(tmp_path, api, summary_timeout=1.0 if mode == "timeout" else 3.0)
        result = engine.compact(history)
    assert history_problems(result.messages) == []
    assert engine.last_report is not None and engine.last_report.source == "extractive"
    carried, compacted = carried_share(history, result.messages)
    assert compacted >= 40 and carried == compacted, (carried, compacted)
    notice = " ".join(result.notices)
    assert f"one line for each of their {compacted} user turn(s)" in notice
    assert "Nothing was dropped without a summary" in notice
    (summary,) = [m for m in result.messages if is_summary_message(m)]
    assert "router/depots/depot_7.py" in summary.content and "KeyError: 'depot_5'" in summary.content
    assert "We decided to cache depot 3 routes" in summary.content


def test_turns_beyond_the_budget_are_kept_verbatim_and_the_notice_says_so(tmp_path: Path) -> None:
    history = incident_history(120)
    with MessagesAPIServer(default=Failure(500)) as api:
        # a small window: the summary budget (and so the fallback's) is small
        engine = make(tmp_path, api, window=16_000, protect_last_n=4)
        result = engine.compact(history)
    notice = " ".join(result.notices)
    kept_verbatim = [m for m in result.messages if m.role == "user" and not is_summary_message(m)]
    assert "newer user turn(s) that did not fit its budget were kept verbatim" in notice
    carried, compacted = carried_share(history, result.messages)
    assert carried == compacted and compacted + len(kept_verbatim) == 120
    assert result.summary is not None and len(result.summary) <= engine._fallback_chars + 100


def test_turn_lines_are_bounded_and_the_capacity_holds() -> None:
    history = incident_history(30)
    for max_chars in (2_000, 8_000, 40_000):
        capacity = turn_capacity(max_chars)
        turns = history[: 4 * min(30, capacity)]
        text = extractive_summary(turns, reason="test", max_chars=max_chars)
        assert len(text) <= max_chars + 100
        log = text.split("## Compacted Turns", 1)[1].splitlines()[1:]
        assert len([line for line in log if line[:1].isdigit()]) == min(30, capacity)
        assert all(len(line) >= 20 for line in log if line[:1].isdigit())
    assert turn_capacity(2_000) * (MIN_TURN_LINE + 1) <= 2_000


def test_the_timeout_bounds_the_whole_call_not_each_retry(tmp_path: Path) -> None:
    """Before: each of the SDK's 3 attempts got the whole timeout (a 5 s bound took 40.8 s)."""
    with MessagesAPIServer(default=Reply(text="too late", delay=3)) as api:
        engine = make(tmp_path, api, summary_timeout=0.5)
        result = engine.compact(incident_history(20))
    # no second attempt: the bound was spent (on a loaded machine the first may not even have
    # reached the server within 0.5 s; what matters is that none followed it)
    assert len(api.requests) <= 1
    assert "longer than its 0.5 s bound, retries included" in " ".join(result.notices)


def test_a_retry_that_would_outlast_the_bound_is_not_made(tmp_path: Path) -> None:
    with MessagesAPIServer(default=Failure(529, retry_after_ms=30_000)) as api:
        engine = make(tmp_path, api, summary_timeout=2.0)
        result = engine.compact(incident_history(20))
    assert len(api.requests) == 1
    assert "not retried: the 2 s bound leaves no time to wait 30.0 s" in " ".join(result.notices)


def test_retries_within_the_bound_still_happen(tmp_path: Path) -> None:
    with MessagesAPIServer([Failure(529, retry_after_ms=1), "## Goal\nrecovered"]) as api:
        engine = make(tmp_path, api, summary_timeout=30.0)
        result = engine.compact(incident_history(20))
    assert len(api.requests) == 2 and result.summary == "## Goal\nrecovered"


def test_a_hung_injected_llm_is_abandoned_at_the_deadline(tmp_path: Path) -> None:
    import threading

    release = threading.Event()

    class Hung:
        def complete(self, **_kwargs: Any) -> str:
            release.wait(30)  # ignores its timeout
            return "late"

    engine = Compressor(CompressorConfig(prune_only_below=0, summary_timeout=0.2),
                        make_context(tmp_path, window=60_000, model="claude-test"), llm=Hung())
    try:
        result = engine.compact(build_history(40, seed=3))
    finally:
        release.set()
    assert engine.last_report is not None and engine.last_report.source == "extractive"
    assert "timeout" in " ".join(result.notices)
