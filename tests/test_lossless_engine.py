"""The lossless engine: compacted turns archived verbatim in context.db, searchable and expandable."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from compressor_support import build_history, make_context

from hermes_core.compaction.markers import is_summary_message, split_summary
from hermes_core.compaction.repair import history_problems
from hermes_core.compaction.tokens import estimate_messages
from hermes_core.errors import ToolError
from hermes_core.plugins.context_engine.lossless import LosslessConfig, LosslessEngine, SpanStore
from hermes_core.types import Message, Session, SwitchReason, ToolCall, ToolContext


def make(home: Path, **settings: object) -> LosslessEngine:
    return LosslessEngine(LosslessConfig(**settings), make_context(home, window=60_000))


def planted_history() -> list[Message]:
    history = build_history(60, seed=31)
    history += [
        Message("user", "Our staging password rotates every Tuesday; the bucket is named quokka-archive-7"),
        Message("assistant", "Noted.", tool_calls=[ToolCall("p1", "terminal", {"command": "aws s3 ls"})]),
        Message("tool", "2024-01-01 quokka-archive-7", tool_call_id="p1", tool_name="terminal"),
        Message("assistant", "The bucket exists."),
    ]
    return history + build_history(80, seed=32)


def tools(engine: LosslessEngine) -> dict:
    return {t.name: t for t in engine.get_tools()}


def test_compaction_archives_the_middle_verbatim(tmp_path: Path) -> None:
    engine = make(tmp_path)
    history = planted_history()
    result = engine.compact(history)
    out = result.messages
    assert history_problems(out) == []
    assert estimate_messages(out) < engine.threshold_tokens < estimate_messages(history)
    (index,) = [m for m in out if is_summary_message(m)]
    assert "span 1:" in index.content and "context_search" in index.content
    assert result.summary is not None and "span 1" in result.summary
    # every message that left the live context is in the archive, unchanged
    db = sqlite3.connect(tmp_path / "context.db")
    stored = db.execute("SELECT role, content FROM span_messages ORDER BY seq").fetchall()
    kept = {id(m) for m in out}
    merged = {split_summary(m.content)[1] for m in out if is_summary_message(m)}  # type: ignore[index]
    gone = [m for m in history if id(m) not in kept and m.content not in merged]
    assert [(m.role, m.content) for m in gone] == stored
    assert engine.last_report is not None and engine.last_report.source == "archived"


def test_search_then_expand_recovers_exact_text(tmp_path: Path) -> None:
    engine = make(tmp_path)
    engine.compact(planted_history())
    search, expand = tools(engine)["context_search"], tools(engine)["context_expand"]
    found = json.loads(search.invoke({"query": "what was the bucket called? quokka"}, ToolContext()))
    hit = found["hits"][0]
    assert "quokka-archive-7" in hit["snippet"]
    page = json.loads(expand.invoke({"span_id": hit["span_id"], "start": hit["seq"], "count": 3},
                                    ToolContext()))
    first = page["messages"][0]
    assert first["content"] == (
        "Our staging password rotates every Tuesday; the bucket is named quokka-archive-7"
    )
    assert page["messages"][1]["tool_calls"] == [{"name": "terminal", "arguments": {"command": "aws s3 ls"}}]
    assert page["next_start"] == hit["seq"] + 3
    none = json.loads(search.invoke({"query": "zebra unicorn?!"}, ToolContext()))
    assert none["hits"] == [] and "no archived message" in none["note"]


def test_punctuation_never_breaks_search(tmp_path: Path) -> None:
    engine = make(tmp_path)
    engine.compact(planted_history())
    search = tools(engine)["context_search"]
    for query in ("what is it?", "friend's bucket", "$5 coupon", "50%", "a/b", 'quokka" OR (', "*"):
        json.loads(search.invoke({"query": query}, ToolContext()))


def test_second_compaction_lists_both_spans_and_keeps_one_index(tmp_path: Path) -> None:
    engine = make(tmp_path)
    first = engine.compact(planted_history()).messages
    second = engine.compact(first + build_history(150, seed=33)).messages
    assert history_problems(second) == []
    (index,) = [m for m in second if is_summary_message(m)]
    assert "span 1:" in index.content and "span 2:" in index.content
    # the older index message itself is not archived as a turn
    db = sqlite3.connect(tmp_path / "context.db")
    assert db.execute("SELECT count(*) FROM span_messages WHERE content LIKE '[Context compaction]%'"
                      ).fetchone() == (0,)


def test_spans_are_scoped_to_their_conversation(tmp_path: Path) -> None:
    engine = make(tmp_path)
    alice, bob = Session("alice-1"), Session("bob-1")
    engine.on_session_switch(alice, None, SwitchReason.NEW)
    engine.compact(planted_history())
    engine.on_session_switch(bob, alice, SwitchReason.NEW)
    engine.compact(build_history(150, seed=34))
    search, expand = tools(engine)["context_search"], tools(engine)["context_expand"]
    as_bob = json.loads(search.invoke({"query": "quokka"}, ToolContext(session=bob)))
    assert as_bob["hits"] == []
    as_alice = json.loads(search.invoke({"query": "quokka"}, ToolContext(session=alice)))
    assert as_alice["hits"]
    with pytest.raises(ToolError, match="not an archived span of this conversation"):
        expand.invoke({"span_id": as_alice["hits"][0]["span_id"]}, ToolContext(session=bob))
    # a compaction's child session continues the parent's conversation
    child = Session("alice-2", parent_session_id="alice-1")
    engine.on_session_switch(child, alice, SwitchReason.COMPRESSION)
    assert json.loads(search.invoke({"query": "quokka"}, ToolContext(session=child)))["hits"]


def test_archive_survives_a_new_engine_instance(tmp_path: Path) -> None:
    session = Session("s-1")
    engine = make(tmp_path)
    engine.bind_session(session)
    engine.compact(planted_history())
    engine.shutdown()
    again = make(tmp_path)
    search = tools(again)["context_search"]
    found = json.loads(search.invoke({"query": "quokka"}, ToolContext(session=session)))
    assert found["hits"]


def test_failed_archive_write_leaves_the_history_unchanged(tmp_path: Path) -> None:
    class BrokenStore(SpanStore):
        def add_span(self, *args: object, **kwargs: object):  # type: ignore[override]
            raise sqlite3.OperationalError("disk I/O error")

    engine = LosslessEngine(LosslessConfig(), make_context(tmp_path, window=60_000),
                            store=BrokenStore(tmp_path / "broken.db"))
    history = planted_history()
    result = engine.compact(history)
    assert result.messages == history and result.summary is None
    assert "archiving the compacted turns failed" in result.notices[0]


def test_expand_pages_are_bounded(tmp_path: Path) -> None:
    engine = make(tmp_path, expand_max_chars=2_000)
    engine.compact(planted_history())
    page = json.loads(tools(engine)["context_expand"].invoke({"span_id": 1, "count": 200}, ToolContext()))
    assert sum(len(m["content"]) for m in page["messages"]) <= 2_000
    assert page["next_start"] is not None


def test_bad_input_and_config(tmp_path: Path) -> None:
    engine = make(tmp_path)
    assert engine.compact([]).messages == []
    assert "only the system prompt" in engine.compact([Message("system", "s")]).notices[0]
    with pytest.raises(ValueError, match=r"Did you mean 0\.8"):
        LosslessConfig(threshold=80)
    # an empty path would be the home folder itself (and the copy tool's context.db)
    with pytest.raises(ValueError, match=r"db_path\n.*at least 1 character"):
        LosslessConfig(db_path="")
    with pytest.raises(ToolError, match="invalid arguments"):
        tools(engine)["context_expand"].invoke({"span_id": 0}, ToolContext())
