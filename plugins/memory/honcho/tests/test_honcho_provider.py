"""The provider's hooks against the loopback Honcho server: what lands where, and when."""

from __future__ import annotations

import json
import time

import pytest
from hermes_core_honcho.testing import Fault, HonchoTestServer
from hermes_core_honcho.testing.store import NotFound

from hermes_core.types import MemoryWrite, Message, Session, SwitchReason

WS = "test-ws"


def turn(provider, session: Session, user: str, assistant: str = "Noted.") -> None:  # type: ignore[no-untyped-def]
    provider.sync_turn(user_message=Message("user", user),
                       assistant_message=Message("assistant", assistant), session=session)


def test_sync_turn_stores_both_messages_in_the_session(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    session = Session(id="20250301_101010_abcdef", platform="cli")
    provider.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW)
    # sync_turn sends on the thread it is called on: the kernel calls it on the provider's lane
    turn(provider, session, "I moved to Lisbon last spring.", "Lisbon, nice.")
    assert provider.wait_idle(5)
    stored = honcho_server.store.messages(WS, session.id)
    assert [(m["peer_id"], m["content"]) for m in stored] == [
        ("user", "I moved to Lisbon last spring."), ("hermes", "Lisbon, nice.")]
    assert stored[0]["metadata"] == {"hermes_session_id": session.id, "role": "user"}
    meta = honcho_server.store.session_json(WS, session.id)["metadata"]
    assert meta["hermes_session_id"] == session.id and meta["switch_reason"] == "new"
    assert honcho_server.store.peer_config(WS, session.id, "hermes") == {
        "observe_me": False, "observe_others": True}


def test_long_messages_are_chunked(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider("  message_max_chars: 400\n")
    session = Session(id="s-long")
    paragraph = "This sentence is about the ETL pipeline and its many stages. " * 5
    long_text = "\n\n".join([paragraph.strip()] * 4)
    turn(provider, session, long_text)
    assert provider.wait_idle(5)
    user_parts = [m for m in honcho_server.store.messages(WS, "s-long") if m["peer_id"] == "user"]
    assert len(user_parts) > 1 and all(len(m["content"]) <= 400 for m in user_parts)
    assert user_parts[1]["content"].startswith("[continued] ")
    assert user_parts[0]["metadata"]["part"] == f"1/{len(user_parts)}"


def test_compaction_switch_opens_a_child_session_with_lineage(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    parent = Session(id="parent-1")
    provider.on_session_switch(new_session=parent, old_session=None, reason=SwitchReason.NEW)
    turn(provider, parent, "We use Airflow 2.8 for the nightly load.")
    provider.queue_prefetch(query="what orchestrator do we use for the load?", session=parent)
    assert provider.wait_idle(5)
    parent_recall = provider.prefetch(query="what orchestrator do we use?", session=parent)
    child = Session(id="child-1", parent_session_id="parent-1")
    provider.on_session_switch(new_session=child, old_session=parent, reason=SwitchReason.COMPRESSION)
    assert provider.wait_idle(5)
    meta = honcho_server.store.session_json(WS, "child-1")["metadata"]
    assert meta["parent_session_id"] == "parent-1" and meta["switch_reason"] == "compression"
    # the child starts from the parent's recall: no empty first turn after a compaction
    assert parent_recall and provider.prefetch(query="and then?", session=child) == parent_recall


def test_prefetch_serves_the_prepared_recall_without_network(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    old = Session(id="old-session")
    turn(provider, old, "I fixed the database hang by raising the pool size to 40.")
    assert provider.wait_idle(5)
    new = Session(id="new-session")
    # first prefetch of a session: a bounded wait for the first recall
    start = time.perf_counter()
    first = provider.prefetch(query="the database hang again", session=new)
    assert time.perf_counter() - start < 0.3
    assert first and "pool size to 40" in first
    provider.queue_prefetch(query="the database hang again", session=new)
    assert provider.wait_idle(5)
    before = len(honcho_server.requests)
    samples = []
    for _ in range(20):
        start = time.perf_counter()
        text = provider.prefetch(query="database hang", session=new)
        samples.append(time.perf_counter() - start)
    assert len(honcho_server.requests) == before, "prefetch made requests"
    assert text and "pool size" in text and max(samples) < 0.05


def test_first_turn_wait_is_bounded_by_the_kernel_deadline(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider("  first_turn_wait: 5\n")
    assert provider.first_turn_wait == pytest.approx(0.24)  # 0.8 x memory.prefetch_timeout
    honcho_server.latency = 1.0
    start = time.perf_counter()
    assert provider.prefetch(query="where do I live?", session=Session(id="slow")) is None
    assert time.perf_counter() - start < 0.3


def test_trivial_messages_start_no_work(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    session = Session(id="s-trivial")
    for text in ("ok", "thanks!", "Thank you.", "/compress", "  ", "👍"):
        assert provider.prefetch(query=text, session=session) is None
        provider.queue_prefetch(query=text, session=session)
    assert provider.wait_idle(5)
    assert honcho_server.requests == []


def test_cadence_and_backoff_on_empty_answers(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider("  context_cadence: 2\n  dialectic_cadence: 1\n  max_backoff: 4\n")
    session = Session(id="s-cadence")
    # a profile fact: the base context is never empty, so it keeps its plain cadence
    provider.on_memory_write(write=MemoryWrite("add", "user", "Keeps bees in the garden"))
    # the fact is queued, not sent at once: turn 1 must find it stored, or its base context is
    # empty and backs off (a loaded fresh-clone run counted turns 1, 5, 7, 9)
    def stored() -> bool:
        try:
            return bool(honcho_server.store.list_conclusions(
                WS, {"observer_id": "hermes", "observed_id": "user"}, 1, 50)["items"])
        except NotFound:  # the workspace is made by the first request
            return False

    deadline = time.monotonic() + 60
    while not stored():
        assert time.monotonic() < deadline, "the profile fact never reached the server"
        time.sleep(0.05)
    for i in range(1, 11):
        provider.queue_prefetch(query=f"tell me about topic number {i} please", session=session)
        assert provider.wait_idle(60)
    context_turns = len(honcho_server.requests_to("GET", r"/context$"))
    chat_turns = len(honcho_server.requests_to("POST", r"/chat$"))
    assert context_turns == 5  # turns 1, 3, 5, 7, 9
    # nothing to recall: the dialectic's interval doubles (turns 1, 3, 7) up to 4x
    assert chat_turns == 3
    # an answer resets the back-off
    turn(provider, session, "Topic number eleven is my garden of olive trees.")
    assert provider.wait_idle(60)
    for i in (11, 12, 13):
        provider.queue_prefetch(query=f"what about topic number {i} and my olive trees", session=session)
        assert provider.wait_idle(60)
    # turn 11 is due (4 turns after 7) and answers: the back-off resets, 12 and 13 ask again
    assert len(honcho_server.requests_to("POST", r"/chat$")) == chat_turns + 3


def test_memory_writes_are_mirrored_as_conclusions(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    session = Session(id="s-mirror")
    provider.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW)
    write = MemoryWrite("add", "user", "Prefers tea over coffee", session_id=session.id,
                        provider="file_memory")
    provider.on_memory_write(write=write)
    provider.on_memory_write(write=MemoryWrite("add", "memory", "agent note, not mirrored"))
    provider.on_memory_write(write=MemoryWrite("add", "user", "Lives in Porto"))
    assert provider.wait_idle(5)

    def contents() -> list[str]:
        page = honcho_server.store.list_conclusions(WS, {"observer_id": "hermes",
                                                         "observed_id": "user"}, 1, 50)
        return sorted(c["content"] for c in page["items"])

    assert contents() == ["Lives in Porto", "Prefers tea over coffee"]
    provider.on_memory_write(write=MemoryWrite("replace", "user", "Lives in Lisbon",
                                               old_text="Lives in Porto"))
    provider.on_memory_write(write=MemoryWrite("remove", "user", "",
                                               old_text="Prefers tea over coffee"))
    assert provider.wait_idle(5)
    assert contents() == ["Lives in Lisbon"]


def test_pre_compress_returns_what_honcho_knows(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    session = Session(id="s-pre")
    assert provider.on_pre_compress(messages=[], session=session) is None
    provider.on_memory_write(write=MemoryWrite("add", "user", "Leads the data team"))
    assert provider.wait_idle(5)
    provider.queue_prefetch(query="who leads the data team", session=session)
    assert provider.wait_idle(5)
    text = provider.on_pre_compress(messages=[], session=session)
    assert text and "Leads the data team" in text


def test_recall_modes(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    tools_only = make_provider("  recall_mode: tools\n")
    tools_only.queue_prefetch(query="what is my favourite colour?", session=Session(id="m1"))
    assert tools_only.prefetch(query="what is my favourite colour?", session=Session(id="m1")) is None
    assert tools_only.wait_idle(5)
    assert honcho_server.requests == []
    assert len(tools_only.get_tools()) == 5
    context_only = make_provider("  recall_mode: context\n")
    assert context_only.get_tools() == []
    block = context_only.system_prompt_block(session=Session(id="m2"))
    assert "recalled memory context" in block and "honcho_search" not in block


# ------------------------------------------------------------------------- failures and the outbox


def test_writes_survive_an_outage_and_are_sent_later(make_provider, honcho_server, hermes_home) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    session = Session(id="s-outage")
    turn(provider, session, "first message")
    assert provider.wait_idle(5)
    honcho_server.faults.append(Fault("status", status=503))
    turn(provider, session, "written while Honcho is down")
    assert provider.wait_idle(5)
    outbox = hermes_home / "honcho" / "outbox.jsonl"
    kept = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert kept[0]["messages"][0]["content"] == "written while Honcho is down"
    failed = [r for r in honcho_server.requests if r.status == 503]
    assert len(failed) == 2, "one try and one retry"
    honcho_server.faults.clear()
    turn(provider, session, "Honcho is back")
    assert provider.wait_idle(5)
    contents = [m["content"] for m in honcho_server.store.messages(WS, "s-outage")
                if m["peer_id"] == "user"]
    assert sorted(contents) == ["Honcho is back", "first message", "written while Honcho is down"]
    assert not outbox.exists()


def test_retry_once_recovers_a_single_failure(make_provider, honcho_server, hermes_home) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    honcho_server.faults.append(Fault("status", status=429, times=1, retry_after=0.1,
                                      path="/messages$"))
    turn(provider, Session(id="s-429"), "one hiccup")
    assert provider.wait_idle(5)
    assert len(honcho_server.store.messages(WS, "s-429")) == 2
    assert not (hermes_home / "honcho" / "outbox.jsonl").exists()


def test_junk_answers_are_reported_and_nothing_is_lost(make_provider, honcho_server, hermes_home,
                                                       caplog) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    honcho_server.faults.append(Fault("junk", path="/messages$"))
    with caplog.at_level("WARNING", logger="hermes_core.plugins.honcho"):
        turn(provider, Session(id="s-junk"), "this must not get lost")
        assert provider.wait_idle(5)
    assert "not a Honcho response" in caplog.text
    assert "this must not get lost" in (hermes_home / "honcho" / "outbox.jsonl").read_text()


def test_refused_writes_are_kept_aside(make_provider, honcho_server, hermes_home) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    honcho_server.faults.append(Fault("status", status=422, path="/messages$"))
    turn(provider, Session(id="s-422"), "refused by the server")
    assert provider.wait_idle(5)
    rejected = (hermes_home / "honcho" / "rejected.jsonl").read_text()
    assert "refused by the server" in rejected and "422" in rejected
    assert len([r for r in honcho_server.requests if r.status == 422]) == 1, "no retry for a 4xx"


def test_shutdown_keeps_unsent_writes_for_the_next_start(make_provider, hermes_home, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with HonchoTestServer(tmp_path / "other.db") as server:
        config = (f"honcho:\n  base_url: {server.url}\n  workspace: {WS}\n  timeout: 0.3\n"
                  "  retry_delay: 0.05\n")
        provider = make_provider(config=config)
        server.latency = 1.0  # every request times out: the writes wait in the outbox
        for i in range(3):
            turn(provider, Session(id="s-shut"), f"queued message {i}")
        assert provider.outbox.failing
        start = time.perf_counter()
        provider.shutdown()
        assert time.perf_counter() - start < 1.0
        outbox = hermes_home / "honcho" / "outbox.jsonl"
        assert outbox.exists()
        kept = [json.loads(line)["messages"][0]["content"] for line in outbox.read_text().splitlines()]
        assert kept == [f"queued message {i}" for i in range(3)], "in order, none lost"
        server.latency = 0.0
        again = make_provider(config=config)  # a new start sends what was kept
        assert again.wait_idle(10)
        time.sleep(0.3)  # the interrupted request may still land; give it time before counting
        users = {m["content"] for m in server.store.messages(WS, "s-shut") if m["peer_id"] == "user"}
        assert users == {"queued message 0", "queued message 1", "queued message 2"}
        assert not outbox.exists()


def test_server_down_fails_open(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    honcho_server.stop()
    start = time.perf_counter()
    assert provider.prefetch(query="anything about my projects?", session=Session(id="down")) is None
    assert time.perf_counter() - start < 0.3
    provider.queue_prefetch(query="anything about my projects?", session=Session(id="down"))
    turn(provider, Session(id="down"), "kept for later")
    assert provider.wait_idle(10)
    assert len(provider.outbox.spool) == 1


def test_ensure_session_timeout_still_accepted_with_a_warning(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    with pytest.warns(DeprecationWarning, match=r"ensure_session\(timeout=\.\.\.\) has no effect"):
        provider.ensure_session("20250301_101010_abcdef", timeout=2.0)
    assert honcho_server.store.session_json(WS, "20250301_101010_abcdef") is not None
