"""The honcho_* tools: their answers, and failures reported to the model as tool errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hermes_core_honcho.testing import Fault

from hermes_core.errors import ToolError
from hermes_core.types import Message, Session, ToolContext

CTX = ToolContext(session=Session(id="tool-session"))


def call(provider: Any, name: str, **args: Any) -> dict[str, Any]:
    tool = next(t for t in provider.get_tools() if t.name == name)
    return json.loads(tool.invoke(args, CTX))


@pytest.fixture
def provider(make_provider: Any) -> Any:
    p = make_provider()
    p.sync_turn(user_message=Message("user", "I keep bees and I use Helix as my editor."),
                assistant_message=Message("assistant", "Bees and Helix, noted."),
                session=Session(id="earlier"))
    assert p.wait_idle(5)
    return p


def test_search_finds_earlier_sessions(provider: Any) -> None:
    out = call(provider, "honcho_search", query="which editor do I use?")
    assert out["results"][0].startswith("[user · earlier]") and "Helix" in out["results"][0]
    assert call(provider, "honcho_search", query="mountains")["result"] == "No matching messages."
    only_ai = call(provider, "honcho_search", query="Helix", peer="ai")
    assert all(line.startswith("[hermes") for line in only_ai["results"])


def test_profile_read_and_replace(provider: Any) -> None:
    assert call(provider, "honcho_profile")["result"] == "No profile facts available yet."
    saved = call(provider, "honcho_profile", card=["Keeps bees", "Uses Helix"])
    assert saved["card"] == ["Keeps bees", "Uses Helix"]
    assert call(provider, "honcho_profile", peer="user")["card"] == ["Keeps bees", "Uses Helix"]


def test_conclude_create_list_query_delete(provider: Any) -> None:
    made = call(provider, "honcho_conclude", conclusion="Prefers answers in bullet points")
    listed = call(provider, "honcho_conclude", list=True)
    assert [c["content"] for c in listed["conclusions"]] == ["Prefers answers in bullet points"]
    ranked = call(provider, "honcho_conclude", list=True, query="bullet points")
    assert ranked["conclusions"][0]["id"] == made["stored"]
    assert call(provider, "honcho_conclude", delete_id=made["stored"]) == {"deleted": made["stored"]}
    assert call(provider, "honcho_conclude", list=True)["conclusions"] == []
    with pytest.raises(ToolError, match="exactly one of"):
        call(provider, "honcho_conclude", conclusion="x", list=True)
    with pytest.raises(ToolError, match="not a conclusion id"):
        call(provider, "honcho_conclude", delete_id="../../peers")
    with pytest.raises(ToolError, match="404"):
        call(provider, "honcho_conclude", delete_id="unknown-id")


def test_reasoning_and_context(provider: Any) -> None:
    answer = call(provider, "honcho_reasoning", query="What editor does the user use?")
    assert "Helix" in answer["answer"]
    assert call(provider, "honcho_reasoning", query="favourite mountain")["answer"] is None
    call(provider, "honcho_conclude", conclusion="Keeps three beehives")
    ctx = call(provider, "honcho_context")
    assert "Keeps three beehives" in ctx["representation"] and ctx["recent_messages"] == []


def test_invalid_peer_is_a_tool_error(provider: Any) -> None:
    with pytest.raises(ToolError, match="not a valid Honcho id"):
        call(provider, "honcho_profile", peer="no spaces allowed")


@pytest.mark.parametrize("fault", [Fault("status", status=503), Fault("status", status=429),
                                   Fault("drop"), Fault("junk")])
def test_failures_reach_the_model_as_tool_errors(provider: Any, honcho_server: Any,
                                                 fault: Fault) -> None:
    honcho_server.faults.append(fault)
    for name, args in [("honcho_search", {"query": "bees"}), ("honcho_reasoning", {"query": "bees"}),
                       ("honcho_conclude", {"conclusion": "likes bees"}), ("honcho_profile", {}),
                       ("honcho_context", {})]:
        with pytest.raises(ToolError, match=r"failed: .*Nothing was changed"):
            call(provider, name, **args)


def test_slow_server_times_out_the_tool(make_provider: Any, honcho_server: Any) -> None:
    provider = make_provider("  tool_timeout: 0.2\n")
    provider.ensure_peers()
    honcho_server.latency = 1.0
    with pytest.raises(ToolError, match="did not answer"):
        call(provider, "honcho_search", query="bees")
