"""What one session_search call costs in context: the default result fits 16k characters of
JSON (hits and short windows first), and session_id/around_message_id page through more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_core.plugins.memory.session_archive import QueryError, SessionArchive
from hermes_core.plugins.memory.session_archive.tool import RESULT_CHARS, session_search
from hermes_core.types import Message, ToolCall


def _fill(a: SessionArchive) -> None:
    for s in range(8):
        msgs = []
        for i in range(60):
            msgs.append(Message("user", f"turn {i} about the heron migration plan " + "z" * 2500))
            msgs.append(Message("assistant", f"reply {i}: the heron counts " + "q" * 4000,
                                tool_calls=[ToolCall(id=f"c{s}{i}", name="write_file",
                                                     arguments={"text": "w" * 3000})]))
        a.append_messages(f"s{s}", msgs)


def size(out: dict[str, object]) -> int:
    return len(json.dumps(out, ensure_ascii=False))


def test_the_default_result_fits_16k_characters(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db") as a:
        _fill(a)
        # before this change, one call returned ~50k characters on such sessions
        out = session_search(a, "heron migration", limit=5)
        assert size(out) <= RESULT_CHARS == 16_000
        assert out["count"] == 5 and all(r["hits"] for r in out["results"])
        assert all(any(m.get("match") for m in r["window"]["messages"]) for r in out["results"])
        assert "session_id" in out["more"]
        for budget in (4_000, 30_000):
            assert size(session_search(a, "heron", limit=5, result_chars=budget)) <= budget
        # more matches than the candidates kept: the best 50 of all 960 (equal scores: the
        # newest, all in the last session), with no note; the result fits
        many = session_search(a, "heron", limit=5, candidates=50)
        assert "note" not in many and [r["session_id"] for r in many["results"]] == ["s7"]
        assert size(many) <= RESULT_CHARS


def test_a_session_is_paged_with_session_id_and_around_message_id(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db") as a:
        _fill(a)
        first = session_search(a, "heron", session_id="s3")
        assert first["mode"] == "session" and size(first) <= RESULT_CHARS
        window = first["window"]
        assert window["messages"] and window["messages_after"] > 0
        later = window["later_message_id"]
        page = session_search(a, "", session_id="s3", around_message_id=later)
        ids = [m["id"] for m in page["window"]["messages"]]
        assert later in ids and size(page) <= RESULT_CHARS
        with pytest.raises(QueryError, match="no session"):
            session_search(a, "", session_id="nope")
        with pytest.raises(QueryError, match="not in session"):
            session_search(a, "", session_id="s3", around_message_id=1)


def test_one_huge_message_still_fits(tmp_path: Path) -> None:
    with SessionArchive(tmp_path / "state.db") as a:
        a.append_messages("big", [Message("user", "egret " + "e" * 500_000)])
        out = session_search(a, "egret")
        assert size(out) <= RESULT_CHARS and out["results"][0]["hits"]
