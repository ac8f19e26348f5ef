"""When the compressor compacts: threshold, pre-flight passes, per-turn cap, back-off, selection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from compressor_support import ScriptedLLM, build_history, make_context

from hermes_core.compaction.repair import history_problems
from hermes_core.compaction.tokens import estimate_messages, estimate_text
from hermes_core.config import load_config
from hermes_core.errors import ConfigError, UnknownNameError
from hermes_core.host import PluginHost
from hermes_core.plugins.context_engine.compressor import Compressor, CompressorConfig
from hermes_core.types import CompressionResult, Message, Session, SwitchReason, Usage


def make(home: Path, llm: Any = None, *, window: int = 60_000, **settings: Any) -> Compressor:
    settings.setdefault("prune_only_below", 0)
    return Compressor(
        CompressorConfig(**settings), make_context(home, window=window, model="claude-test"),
        llm=llm if llm is not None else ScriptedLLM(default="## Goal\nS"),
    )


def test_should_compress_follows_the_threshold(tmp_path: Path) -> None:
    engine = make(tmp_path, threshold=0.5)
    assert engine.threshold_tokens == 30_000
    small = build_history(5)
    assert engine.should_compress(small, None) is False
    assert engine.should_compress(small, 29_999) is False
    assert engine.should_compress(small, 30_000) is True  # the API's real count wins when larger
    big = build_history(150)
    assert estimate_messages(big) > 30_000 and engine.should_compress(big, None) is True
    engine.overhead_tokens = 40_000  # system prompt and tool schemas count too
    assert engine.should_compress(small, None) is True
    off = make(tmp_path, enabled=False)
    assert off.should_compress(big, 10**6) is False
    assert off.compact(big).messages != big  # manual /compress still works


def test_cjk_counts_per_character() -> None:
    english = "the quick brown fox jumps over the lazy dog " * 10
    chinese = "敏捷的棕色狐狸跳过了懒狗" * 10
    assert estimate_text(english) == (len(english) + 3) // 4
    assert estimate_text(chinese) == len(chinese)  # not len/4
    mixed = "résumé naïve Привет"
    assert len(mixed) // 4 < estimate_text(mixed) <= len(mixed)


def test_preflight_runs_passes_until_under_the_threshold(tmp_path: Path) -> None:
    calls: list[int] = []

    def memory(history: list[Message]) -> str:
        calls.append(len(history))
        return "remember: the user likes short answers"

    llm = ScriptedLLM(default="## Goal\nS")
    engine = make(tmp_path, llm)
    history = build_history(300)
    result = engine.preflight(history, memory_context=memory)
    assert isinstance(result, CompressionResult)
    assert estimate_messages(result.messages) < engine.threshold_tokens
    assert history_problems(result.messages) == []
    assert calls == [len(history)] and len(llm.calls) == 1
    assert "remember: the user likes short answers" in llm.calls[0]["prompt"]
    assert engine.preflight(result.messages) is None  # already under: nothing to do


def test_preflight_stops_at_an_ineffective_pass_and_when_nothing_shrinks(tmp_path: Path) -> None:
    llm = ScriptedLLM(default="## Goal\nS")
    # the protected tail alone is over the threshold: one pass shrinks the history, but it stays
    # over, so the back-off stops the next passes instead of looping
    engine = make(tmp_path, llm, protect_last_n=400)
    history = build_history(120)
    result = engine.preflight(history)
    assert result is not None and len(llm.calls) == 1
    assert estimate_messages(result.messages) >= engine.threshold_tokens
    assert any("automatic compaction pauses" in n for n in result.notices)
    # everything protected: a pass cannot shrink anything, so nothing is returned
    stuck = make(tmp_path, llm, protect_last_n=5_000, protect_first_n=0)
    assert stuck.preflight(history) is None
    assert len(llm.calls) == 1


def test_at_most_max_per_turn_compactions(tmp_path: Path) -> None:
    engine = make(tmp_path, max_per_turn=3)
    history = build_history(150)
    for _ in range(3):
        assert engine.should_compress(history, None)
        engine.compact(history)
    assert engine.should_compress(history, None) is False
    engine.begin_turn()
    assert engine.should_compress(history, None) is True


def test_ineffective_compaction_backs_off_instead_of_looping(tmp_path: Path) -> None:
    engine = make(tmp_path, protect_last_n=400)  # the tail alone stays over the threshold
    history = build_history(120)
    result = engine.compact(history)
    after = estimate_messages(result.messages)
    assert after >= engine.threshold_tokens
    notice = " ".join(result.notices)
    assert "automatic compaction pauses" in notice and "protect_last_n" in notice
    engine.begin_turn()
    assert engine.should_compress(result.messages, None) is False  # backing off
    grown = result.messages + build_history(40, seed=99)
    assert estimate_messages(grown) >= engine.policy.backoff_until
    assert engine.should_compress(grown, None) is True  # it grew past the margin


def test_real_usage_confirms_or_clears_the_back_off(tmp_path: Path) -> None:
    engine = make(tmp_path)
    history = build_history(150)
    result = engine.compact(history)
    small = result.messages
    # the stale pre-compaction prompt size is ignored right after a compaction
    assert engine.should_compress(small, 90_000) is False
    # the first real reading is still over: the floor cannot be compacted away -> back off
    engine.update_from_response(Usage(input_tokens=35_000))
    engine.begin_turn()
    assert engine.policy.backoff_until is not None
    assert engine.should_compress(small, 36_000) is False
    # a reading under the threshold clears it
    engine.update_from_response(Usage(input_tokens=10_000))
    assert engine.policy.backoff_until is None
    # usage without numbers (a provider that omits it) changes nothing
    engine.update_from_response(Usage())
    assert engine.policy.backoff_until is None


def test_session_switch_resets_except_for_compression(tmp_path: Path) -> None:
    engine = make(tmp_path)
    history = build_history(150)
    engine.compact(history)
    old, child = Session("s1"), Session("s2", parent_session_id="s1")
    engine.on_session_switch(child, old, SwitchReason.COMPRESSION)
    assert engine.policy.compactions_total == 1
    engine.on_session_switch(Session("s3"), child, SwitchReason.NEW)
    assert engine.policy.compactions_total == 0 and engine.policy.backoff_until is None


@pytest.mark.parametrize(
    ("value", "hint"),
    [(50, "Did you mean 0.5?"), (0, "strictly between 0 and 1"), (1.5, "strictly between 0 and 1"),
     (-0.2, "strictly between 0 and 1")],
)
def test_threshold_outside_zero_one_is_a_clear_error(value: float, hint: str) -> None:
    with pytest.raises(ValueError, match=hint):
        CompressorConfig(threshold=value)


def test_summary_bounds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="summary_min_tokens"):
        CompressorConfig(summary_min_tokens=5_000, summary_max_tokens=3_000)


# ------------------------------------------------------------------------ through the kernel


def host_for(home: Path, config_text: str) -> PluginHost:
    (home / "config.yaml").write_text(config_text, encoding="utf-8")
    return PluginHost.load(home, config=load_config(home), entry_points=False, directories=False)


def test_context_engine_selects_exactly_one_engine(home: Path) -> None:
    host = host_for(home, "context:\n  engine: lossless\nlossless:\n  threshold: 0.4\n")
    assert {"compressor", "lossless"} <= set(host.registries.context_engines.names())
    engine = host.activate("context-engine", host.config.core.context.engine, config_key="context.engine")
    assert type(engine).__name__ == "LosslessEngine"
    assert engine.config.threshold == 0.4
    assert [k for k in host.instances if k.startswith("context-engine:")] == ["context-engine:lossless"]
    # its hooks answer for the manager: should_compress and compress
    history = build_history(150)
    assert host.pm.hook.should_compress(messages=history, prompt_tokens=None, session=None) is True
    result = host.pm.hook.compress(messages=history, focus_topic=None, memory_context="",
                                   session=None)
    assert isinstance(result, CompressionResult) and len(result.messages) < len(history)
    host.shutdown()


def test_default_engine_is_the_compressor_with_its_section(home: Path) -> None:
    host = host_for(home, "compression:\n  threshold: 0.3\n  protect_last_n: 8\n")
    engine = host.activate("context-engine", host.config.core.context.engine, config_key="context.engine")
    assert isinstance(engine, Compressor)
    assert engine.settings.threshold == 0.3 and engine.settings.protect_last_n == 8
    assert engine.llm is not None and engine.llm.unavailable()  # no key: the summary falls back
    result = host.pm.hook.compress(messages=build_history(200), focus_topic="tests",
                                   memory_context="", session=None)
    assert "not_configured" in " ".join(result.notices)


def test_bad_compression_section_is_reported_with_file_and_hint(home: Path) -> None:
    host = host_for(home, "compression:\n  threshold: 75\n")
    with pytest.raises(ConfigError) as info:
        host.validate_config()
    text = str(info.value)
    assert "config.yaml, line 2" in text and "compression.threshold" in text and "0.75" in text
    with pytest.raises(ConfigError):
        host.activate("context-engine", "compressor", config_key="context.engine")
    unknown = host_for(home, "context:\n  engine: nope\n")
    with pytest.raises(UnknownNameError, match="Available: compressor, lossless"):
        unknown.activate("context-engine", "nope", config_key="context.engine")


def test_kit_helpers_third_party_engines_may_use(tmp_path: Path) -> None:
    """Public kit names a third-party engine may call, though the built-ins no longer do:
    ``PolicyEngine.status``, ``tokens.message_token_list``, ``assemble(timestamp=)``."""
    from hermes_core.compaction.assemble import assemble
    from hermes_core.compaction.markers import is_standalone_summary, is_summary_message
    from hermes_core.compaction.tokens import estimate_message, message_token_list

    engine = make(tmp_path, threshold=0.5)
    history = [Message(role="system", content="sys")]
    for i in range(60):
        history += [Message(role="user", content=f"question {i} " + "word " * 300, timestamp=i),
                    Message(role="assistant", content=f"answer {i} " + "word " * 300,
                            timestamp=i + 0.5)]
    status = engine.status(history)
    assert status["engine"] == "compressor" and status["threshold_tokens"] == 30_000
    assert status["tokens"] == estimate_messages(history) and status["compactions_total"] == 0
    assert message_token_list(history) == [estimate_message(m) for m in history]
    plan = engine.plan(history)

    def summary_of(messages: list[Message]) -> Message:
        (summary,) = [m for m in messages if is_summary_message(m)]
        assert is_standalone_summary(summary)
        return summary

    assert summary_of(assemble(plan, history, "S", timestamp=99.0)).timestamp == 99.0
    assert summary_of(assemble(plan, history, "S")).timestamp == history[plan.tail_start].timestamp
