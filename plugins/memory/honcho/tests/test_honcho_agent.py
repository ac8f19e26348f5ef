"""End to end through hermes-core's agent loop, with the file memory beside the Honcho provider.

Only the model's words are fake: a replay reads them from a transcript, and the failure tests use
hermes-core's loopback Messages API server with the real anthropic SDK. The Honcho side is the
loopback server over real HTTP.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import hermes_core_honcho.plugin as honcho_plugin
import pytest
from hermes_core_honcho.testing import Fault, HonchoTestServer

from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.replay import RecordingHost, load_transcript, replay
from hermes_core.testing import MessagesAPIServer, Reply

EXAMPLE = Path(__file__).resolve().parents[4] / "examples" / "first-week.jsonl"
WS = "test-ws"


def llm_section(base_url: str) -> str:
    """The `llm:` section pointing the kernel's main client at a loopback Messages API server."""
    return (f"llm:\n  base_url: {base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n")


def load_host(home: Path, honcho_section: str, extra: str = "") -> RecordingHost:
    text = "memory:\n  providers: [file_memory, honcho]\n" + extra + honcho_section
    host = RecordingHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                              entry_points=False, directories=False,
                              plugins=[("honcho", honcho_plugin)])
    assert isinstance(host, RecordingHost)
    return host


@pytest.mark.skipif(not EXAMPLE.exists(), reason="needs the hermes-core repository's examples/")
def test_replay_lands_turn_by_turn_and_a_later_session_recalls_it(
        hermes_home: Path, honcho_server: HonchoTestServer, honcho_config: str) -> None:
    host = load_host(hermes_home, honcho_config)
    landed: list[tuple[str, int]] = []

    def on_turn(record: dict[str, Any]) -> None:
        provider = host.instances["memory-provider:honcho"]
        assert provider.wait_idle(5)  # type: ignore[attr-defined]
        sid = record["session_id"]
        landed.append((sid, len(honcho_server.store.messages(WS, sid))))

    report = replay(load_transcript(EXAMPLE), host, on_turn=on_turn)
    sessions = list(dict.fromkeys(sid for sid, _n in landed))
    assert len(sessions) == 2
    # each turn adds its user message and the final assistant answer, in its own Honcho session
    assert [n for sid, n in landed if sid == sessions[0]] == [2, 4, 6, 8]
    assert [n for sid, n in landed if sid == sessions[1]] == [2, 4]
    second = honcho_server.store.session_json(WS, sessions[1])["metadata"]
    assert second["hermes_session_id"] == sessions[1] and "parent_session_id" not in second
    # the file memory's user-profile writes were mirrored as conclusions
    conclusions = honcho_server.store.list_conclusions(WS, {"observed_id": "user"}, 1, 50)["items"]
    assert any("Rotterdam" in c["content"] for c in conclusions)
    # the later session's first prefetch brings back what was said in the first one
    first_of_second = next(t for t in report.turns if t["session_id"] == sessions[1])
    recall = next(p for p in first_of_second["prefetch"] if p["provider"] == "honcho")
    assert recall["status"] == "fresh" and recall["ms"] < 300
    assert "Rotterdam" in recall["text"]  # the profile, from the mirrored conclusions
    assert "shipment events from S3" in recall["text"]  # session 1's words, via the dialectic
    for turn in report.turns:
        for p in turn["prefetch"]:
            assert p["status"] != "error" and (p["ms"] is None or p["ms"] < 300), p


@pytest.mark.parametrize("failure", ["down", "429", "503", "slow", "dropped"])
def test_every_turn_completes_when_honcho_fails(hermes_home: Path, tmp_path: Path,
                                                failure: str) -> None:
    server = HonchoTestServer(tmp_path / "honcho.db").start()
    url = server.url
    # "down": a port this test holds bound and never listens on, so every connection is refused
    # (a stopped server's port could be taken by the next listener, e.g. the Messages API's)
    held = socket.socket()
    if failure == "down":
        server.stop()
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}"
    section = (f"honcho:\n  base_url: {url}\n  workspace: {WS}\n  timeout: 0.5\n"
               "  tool_timeout: 0.3\n  retry_delay: 0.05\n  shutdown_timeout: 0.5\n")
    if failure == "slow":
        server.latency = 1.0
    elif failure == "dropped":
        server.faults.append(Fault("drop"))
    elif failure != "down":
        server.faults.append(Fault("status", status=int(failure), retry_after=0))
    script = [Reply(tool_calls=[{"name": "honcho_search", "input": {"query": "editor"}}]),
              Reply(text="Searched."), Reply(text="Second answer."), Reply(text="Third answer.")]
    try:
        with MessagesAPIServer(script) as api:
            host = load_host(hermes_home, section + llm_section(api.base_url))
            agent = Agent.create(host)  # the client llm.* selects (the kernel builds it)
            results = []
            for text in ("Which editor do I use, do you remember?",
                         "I switched to Helix last month, for the record.",
                         "What else should I tell you about my setup?"):
                start = time.perf_counter()
                results.append((agent.run_turn(text), time.perf_counter() - start))
            outbox = hermes_home / "honcho" / "outbox.jsonl"
            agent.close()
    finally:
        held.close()
        if failure != "down":
            server.stop()
    for result, _seconds in results:
        recall = next(r for r in result.prefetch if r.provider == "honcho")
        assert recall.status in ("fresh", "stale")
        assert recall.seconds is None or recall.seconds < 0.3, recall
    first = results[0][0]
    assert first.reply == "Searched."
    tool = first.tools[0]
    assert tool.is_error and "searching Honcho failed" in tool.content
    assert results[1][0].reply == "Second answer." and results[2][0].reply == "Third answer."
    # nothing is lost: the turns Honcho did not take wait in the outbox for the next start
    if failure != "slow":
        assert "I switched to Helix last month" in outbox.read_text()
