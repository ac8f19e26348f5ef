"""When the summary model fails, a deterministic extractive summary takes its place.

The summariser is the real AnthropicLLM talking to the loopback Messages API server; the server
scripts each failure class (429, 5xx, 529, slow, empty) or the model's words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from compressor_support import build_history, make_context

from hermes_core.compaction.markers import is_summary_message
from hermes_core.compaction.repair import history_problems
from hermes_core.llm import LLMFailure
from hermes_core.plugins.context_engine.compressor import Compressor, CompressorConfig
from hermes_core.plugins.context_engine.compressor.summary import SUMMARY_SYSTEM
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.testing import Failure, MessagesAPIServer, Reply
from hermes_core.types import Message, ToolCall


def history_with_facts() -> list[Message]:
    """A long history whose middle holds facts an extractive summary must keep."""
    history = build_history(40, seed=21)
    history += [
        Message("user", "Never touch the vendored copy; deploy to https://staging.example.test/api"),
        Message("assistant", "We decided to use PostgreSQL instead of SQLite.",
                tool_calls=[ToolCall("f1", "terminal", {"command": "make migrate-db"})]),
        Message("tool", "Traceback (most recent call last):\nValueError: bad column 'owner_id'",
                tool_call_id="f1", tool_name="terminal"),
        Message("assistant", "Editing it now.",
                tool_calls=[ToolCall("f2", "write_file", {"path": "db/migrations/0042_owner.py"})]),
        Message("tool", "ok", tool_call_id="f2", tool_name="write_file"),
        Message("assistant", "The migration is fixed."),
    ]
    return history + build_history(60, seed=22)


def make(home: Path, api: MessagesAPIServer | None, **settings: Any) -> Compressor:
    settings.setdefault("prune_only_below", 0)
    llm = None
    if api is not None:
        llm = AnthropicLLM(api_key="k", base_url=api.base_url, model="claude-test", max_retries=0)
    return Compressor(
        CompressorConfig(**settings), make_context(home, window=60_000, model="claude-test"), llm=llm
    )


def assert_extractive(result: Any, failure: str) -> None:
    out = result.messages
    assert history_problems(out) == []
    (summary,) = [m for m in out if is_summary_message(m)]
    text = summary.content
    for fact in ("db/migrations/0042_owner.py", "make migrate-db", "ValueError: bad column",
                 "https://staging.example.test/api", "PostgreSQL instead of SQLite",
                 "Never touch the vendored copy"):
        assert fact in text, f"the extractive summary lost {fact!r}"
    assert "## Progress" in text and "### Blocked" in text
    notice = " ".join(result.notices)
    assert f"summary model failed ({failure}" in notice
    assert "deterministic extractive summary" in notice and "Nothing was dropped" in notice


@pytest.mark.parametrize(
    ("item", "failure"),
    [
        (Failure(429, "slow down"), LLMFailure.RATE_LIMITED),
        (Failure(500), LLMFailure.SERVER_ERROR),
        (Failure(502), LLMFailure.SERVER_ERROR),
        (Failure(529), LLMFailure.OVERLOADED),
        (Failure(401), LLMFailure.AUTH),
        (Failure(400, "prompt is too long"), LLMFailure.BAD_REQUEST),
        (Reply(), LLMFailure.EMPTY),
        (Reply(text=" \n\t"), LLMFailure.EMPTY),
    ],
)
def test_each_failure_class_falls_back(tmp_path: Path, item: Failure | Reply, failure: LLMFailure) -> None:
    history = history_with_facts()
    with MessagesAPIServer([item]) as api:
        engine = make(tmp_path, api)
        result = engine.compact(history)
    assert len(api.requests) == 1
    assert_extractive(result, failure.value)
    assert engine.last_report is not None and engine.last_report.source == "extractive"
    assert engine.last_report.failure is not None and engine.last_report.failure.startswith(failure.value)


def test_timeout_falls_back(tmp_path: Path) -> None:
    with MessagesAPIServer([Reply(text="too late", delay=3)]) as api:
        engine = make(tmp_path, api, summary_timeout=0.3)
        result = engine.compact(history_with_facts())
    assert_extractive(result, "timeout")


def test_unreachable_endpoint_falls_back(tmp_path: Path) -> None:
    with MessagesAPIServer() as api:
        dead = api.base_url  # stopped below: nothing listens on that port any more
    engine = make(tmp_path, None)
    engine.llm = AnthropicLLM(api_key="k", base_url=dead, model="claude-test", max_retries=0)
    assert_extractive(engine.compact(history_with_facts()), "connection")


def test_window_too_small_falls_back_without_a_call(tmp_path: Path) -> None:
    with MessagesAPIServer(default="never used") as api:
        engine = make(tmp_path, api)
        engine.summary_window = 3_000
        result = engine.compact(history_with_facts())
    assert api.requests == []
    assert_extractive(result, "window_too_small")


def test_no_key_configured_falls_back_and_says_how_to_fix(tmp_path: Path) -> None:
    engine = Compressor(
        CompressorConfig(prune_only_below=0), make_context(tmp_path, window=60_000, model="claude-test")
    )
    assert engine.llm is not None  # the client: without llm.api_key it sends nothing
    result = engine.compact(history_with_facts())
    assert_extractive(result, "not_configured")
    assert "ANTHROPIC_API_KEY" in " ".join(result.notices)


def test_a_configured_key_builds_an_anthropic_summariser(tmp_path: Path) -> None:
    with MessagesAPIServer(["## Goal\nFrom the loopback model"]) as api:
        context = make_context(tmp_path, window=60_000, model="claude-test", api_key="sk-test",
                               base_url=api.base_url, max_retries=0)
        engine = Compressor(CompressorConfig(prune_only_below=0, summary_model="claude-small"), context)
        assert isinstance(engine.llm, AnthropicLLM)
        result = engine.compact(history_with_facts())
    assert "From the loopback model" in result.summary
    body = api.bodies[0]
    assert body["model"] == "claude-small"
    assert body["system"][0]["text"] == SUMMARY_SYSTEM
    assert "<turns>" in body["messages"][0]["content"][0]["text"]
    assert result.notices == [n for n in result.notices if "failed" not in n]


def test_after_a_failure_the_model_rests_then_is_asked_again(tmp_path: Path) -> None:
    history = history_with_facts()
    with MessagesAPIServer([Failure(429), "## Goal\nrecovered"]) as api:
        engine = make(tmp_path, api, failure_cooldown_seconds=60)
        engine.compact(history)
        second = engine.compact(history)  # inside the cooldown: no call, extractive again
        assert len(api.requests) == 1
        assert "not asked again" in " ".join(second.notices)
        engine._cooldown_until = 0.0  # the cooldown has passed
        third = engine.compact(history)
    assert len(api.requests) == 2
    assert third.summary == "## Goal\nrecovered"


def test_abort_mode_leaves_the_history_unchanged(tmp_path: Path) -> None:
    history = history_with_facts()
    with MessagesAPIServer([Failure(503)]) as api:
        engine = make(tmp_path, api, on_summary_failure="abort")
        result = engine.compact(history)
    assert result.messages == history and result.summary is None
    assert "aborted" in " ".join(result.notices)
    assert engine.last_report is not None and engine.last_report.source == "aborted"


def test_fallback_keeps_the_previous_summary(tmp_path: Path) -> None:
    with MessagesAPIServer(["## Goal\nEARLIER-SUMMARY-FACT: port 8443", Failure(500)]) as api:
        engine = make(tmp_path, api, failure_cooldown_seconds=0)
        first = engine.compact(history_with_facts()).messages
        second = engine.compact(first + build_history(100, seed=23))
    (summary,) = [m for m in second.messages if is_summary_message(m)]
    assert "EARLIER-SUMMARY-FACT: port 8443" in summary.content
    assert "## Earlier Summary (carried over)" in summary.content
