"""The provider's hooks against the in-memory stand-in (see conftest.py): what is sent, when, and
what a turn costs when the server is slow or down."""

from __future__ import annotations

import json
import time

import pytest

from hermes_core.errors import ToolError
from hermes_core.types import EndReason, MemoryWrite, Message, Session, SwitchReason, ToolContext

from .conftest import build_provider


def turn(provider, session, user_text, reply="Noted.", history=None):
    user, assistant = Message("user", user_text), Message("assistant", reply)
    messages = [*(history or []), user, assistant]
    provider.sync_turn(user, assistant, session, messages)
    return messages


def tool(provider, name):
    return next(t for t in provider.get_tools() if t.name == name)


def test_turn_is_retained_as_append_to_the_session_document(provider, fake):
    root = Session(id="s-root", platform="cli")
    history = turn(provider, root, "I fixed the database hang by raising the pool size to 40")
    turn(provider, root, "and the cache is Redis 7", history=history)
    assert provider.retains.wait_idle(5)
    bodies = fake.calls("/memories")
    assert len(bodies) == 2 and all(b["async"] is True for b in bodies)
    # one operation id per turn: a re-send after a lost answer is a no-op on the server
    assert len({b["operation_id"] for b in bodies}) == 2
    first, second = bodies[0]["items"][0], bodies[1]["items"][0]
    assert first["document_id"] == "s-root" and first["update_mode"] == "append"
    assert first["content"] == ("User: I fixed the database hang by raising the pool size to 40\n"
                                "Assistant: Noted.")
    assert first["metadata"] == {"session_id": "s-root", "turn": "1", "platform": "cli",
                                 "source": "hermes-core"}
    assert second["metadata"]["turn"] == "2"
    assert set(first["tags"]) == {"session:s-root", "lineage:s-root", "platform:cli"}
    assert first["timestamp"].endswith("+00:00")


def test_compaction_child_carries_parent_and_lineage_tags(provider, fake):
    root = Session(id="s-1")
    child = Session(id="s-2", parent_session_id="s-1")
    grandchild = Session(id="s-3", parent_session_id="s-2")
    provider.on_session_switch(root, None, SwitchReason.NEW)
    provider.on_session_switch(child, root, SwitchReason.COMPRESSION)
    provider.on_session_switch(grandchild, child, SwitchReason.COMPRESSION)
    turn(provider, grandchild, "still about the outage")
    assert provider.retains.wait_idle(5)
    item = fake.calls("/memories")[0]["items"][0]
    assert {"session:s-3", "parent:s-2", "lineage:s-1"} <= set(item["tags"])
    assert item["metadata"]["parent_session_id"] == "s-2"


def test_old_server_gets_one_document_per_turn(hermes_home, fake):
    fake.version = "0.4.2"
    provider = build_provider(hermes_home, fake)
    turn(provider, Session(id="s-old"), "hello there")
    assert provider.retains.wait_idle(5)
    item = fake.calls("/memories")[0]["items"][0]
    assert item["document_id"] == "s-old#turn-1" and "update_mode" not in item
    provider.shutdown()


def test_long_turn_is_split_into_items_of_one_document(hermes_home, fake):
    provider = build_provider(hermes_home, fake,
                              "hindsight:\n  bank: unit\n  retain_item_chars: 1000\n")
    turn(provider, Session(id="s-long"), "word " * 500)
    assert provider.retains.wait_idle(5)
    items = fake.calls("/memories")[0]["items"]
    assert len(items) == 3 and {i["document_id"] for i in items} == {"s-long"}
    assert "".join(i["content"] for i in items).startswith("User: word word")
    provider.shutdown()


def test_huge_turn_keeps_its_head_and_tail(hermes_home, fake):
    provider = build_provider(hermes_home, fake, "hindsight:\n  retain_max_chars: 3000\n")
    turn(provider, Session(id="s-huge"), "START " + "x" * 1_000_000 + " END")
    assert provider.retains.wait_idle(5)
    text = "".join(i["content"] for i in fake.calls("/memories")[0]["items"])
    assert len(text) < 3100 and text.startswith("User: START") and "characters left out" in text
    assert "Assistant: Noted." in text
    provider.shutdown()


def test_retry_after_a_lost_answer_reuses_the_operation_id(hermes_home, fake):
    provider = build_provider(hermes_home, fake)
    fake.retain_status = 503
    turn(provider, Session(id="s-retry"), "try again")
    assert provider.retains.wait_idle(10)
    ids = {b["operation_id"] for b in fake.calls("/memories")}
    assert len(fake.calls("/memories")) == 3 and len(ids) == 1
    provider.shutdown()


def test_a_slow_server_holds_the_providers_lane_never_the_caller(provider, fake):
    """The kernel runs sync_turn on the provider's lane (here: its background lane, through the
    same run_later the provider uses), so the caller never waits for the server."""
    fake.release.clear()  # every request hangs until released
    start = time.perf_counter()
    for n in range(5):
        assert provider.context.run_later(
            lambda n=n: turn(provider, Session(id="s-slow"), f"message {n}"), f"turn {n}")
    assert time.perf_counter() - start < 0.05
    fake.release.set()
    deadline = time.monotonic() + 5
    while len(fake.calls("/memories")) < 5:
        assert time.monotonic() < deadline, fake.calls("/memories")
        time.sleep(0.01)
    contents = [b["items"][0]["content"] for b in fake.calls("/memories")]
    assert contents == [f"User: message {n}\nAssistant: Noted." for n in range(5)], "in order"


def test_queued_recall_is_served_from_memory(provider, fake):
    fake.memories.append({"bank": "unit", "id": "m1", "content": "Priya's warehouse is Postgres 15",
                          "tags": ["session:old"], "document_id": "old"})
    session = Session(id="s-now")
    provider.queue_prefetch("which warehouse does Priya use", session)
    assert provider.prefetcher.idle(5)
    recalls = len(fake.calls("/recall"))
    start = time.perf_counter()
    text = provider.prefetch("which warehouse does Priya use", session)
    assert time.perf_counter() - start < 0.01, "a prepared recall is served without I/O"
    assert len(fake.calls("/recall")) == recalls
    assert text.startswith("Memories recalled from earlier conversations (Hindsight bank 'unit'):")
    assert "- Priya's warehouse is Postgres 15 [world, 2026-01-02]" in text


def test_prefetch_without_preparation_asks_live_within_the_wait(provider, fake):
    fake.memories.append({"bank": "unit", "id": "m1", "content": "the deploy runs on Tuesdays",
                          "tags": [], "document_id": "old"})
    text = provider.prefetch("when does the deploy run", Session(id="first-turn"))
    assert "deploy runs on Tuesdays" in text


def test_recall_types_follow_the_server(hermes_home, fake, provider):
    provider.queue_prefetch("anything at all", Session(id="a"))
    assert provider.prefetcher.idle(5)
    assert fake.calls("/recall")[-1]["types"] == ["world", "experience"]  # no LLM: no observations

    fake.observations = True
    other = build_provider(hermes_home, fake, "hindsight:\n  bank: unit2\n")
    assert other.recall_types() == ["world", "experience", "observation"]
    other.shutdown()


def test_configured_observations_only_falls_back_without_llm(hermes_home, fake, caplog):
    provider = build_provider(hermes_home, fake,
                              "hindsight:\n  bank: unit\n  recall_types: [observation]\n")
    assert provider.recall_types() == ["world", "experience"]
    assert "has no observations" in caplog.text
    provider.shutdown()


def test_memories_of_the_current_session_are_left_out(provider, fake):
    fake.memories += [
        {"bank": "unit", "id": "a", "content": "blue deploy plan", "tags": ["session:now"],
         "document_id": "now"},
        {"bank": "unit", "id": "b", "content": "blue deploy history", "tags": ["session:then"],
         "document_id": "then"},
    ]
    text = provider.prefetch("blue deploy", Session(id="now"))
    assert "blue deploy history" in text and "blue deploy plan" not in text


@pytest.mark.parametrize("how", ["down", "slow"])
def test_prefetch_meets_the_deadline_when_the_server_is_down_or_slow(provider, fake, how):
    if how == "down":
        fake.down = True
    else:
        fake.delay = 3.0
    session = Session(id="s-outage")
    samples = []
    for n in range(3):
        start = time.perf_counter()
        provider.prefetch(f"question number {n}", session)
        samples.append(time.perf_counter() - start)
    assert max(samples) < 0.3, samples  # the kernel's default memory.prefetch_timeout
    fake.delay = 0


def test_live_wait_stays_below_the_kernel_deadline(hermes_home, fake):
    provider = build_provider(hermes_home, fake,
                              "memory:\n  prefetch_timeout: 0.1\nhindsight:\n  prefetch_live_wait: 2\n")
    assert provider.live_wait == pytest.approx(0.06)
    provider.shutdown()


def test_a_turn_is_sent_before_the_switch_that_follows_it(provider, fake):
    fake.delay = 0.05
    old, new = Session(id="old"), Session(id="new")
    turn(provider, old, "first message of the old session")
    assert len(fake.calls("/memories")) == 1, "sync_turn sends on its own lane, before returning"
    provider.on_session_switch(new, old, SwitchReason.NEW)


def test_shutdown_keeps_unsent_turns_in_the_spool(hermes_home, fake):
    provider = build_provider(hermes_home, fake, "hindsight:\n  bank: unit\n")
    fake.down = True
    turn(provider, Session(id="s-down"), "remember this even though the server is down")
    start = time.perf_counter()
    provider.shutdown()
    assert time.perf_counter() - start < 3
    spool = hermes_home / "hindsight" / "spool-unit.jsonl"
    jobs = [json.loads(line) for line in spool.read_text().splitlines()]
    assert jobs[0]["session_id"] == "s-down" and "server is down" in jobs[0]["items"][0]["content"]

    fake.down = False  # the next process sends the spool before its first turn
    again = build_provider(hermes_home, fake)
    turn(again, Session(id="s-up"), "the server is back")
    assert again.retains.wait_idle(5)
    contents = [b["items"][0]["content"] for b in fake.calls("/memories")]
    # the spooled turn goes first; an attempt of the first process still running when the server
    # came back may deliver it once more (at least once, as documented), never the new turn twice
    assert "server is down" in contents[0] and any("server is back" in c for c in contents)
    assert all("server is down" in c or "server is back" in c for c in contents)
    assert sum("server is back" in c for c in contents) == 1
    assert not spool.exists()
    again.shutdown()


def test_memory_write_is_mirrored_and_remove_is_not(provider, fake):
    provider.on_memory_write(MemoryWrite("add", "user", "Prefers short answers",
                                         session_id="s1", provider="file_memory"))
    provider.on_memory_write(MemoryWrite("remove", "user", "Prefers short answers"))
    assert provider.retains.wait_idle(5)
    bodies = fake.calls("/memories")
    assert len(bodies) == 1
    item = bodies[0]["items"][0]
    assert item["content"] == "Prefers short answers" and "document_id" not in item
    assert {"source:file_memory", "target:user", "session:s1"} <= set(item["tags"])


def test_system_prompt_block_is_stable(provider):
    session = Session(id="s")
    first = provider.system_prompt_block(session)
    turn(provider, session, "something")
    assert provider.system_prompt_block(session) == first and "bank 'unit'" in first


def test_tools(provider, fake):
    ctx = ToolContext(session=Session(id="s-tools"))
    out = json.loads(tool(provider, "hindsight_retain").invoke(
        {"content": "The VPN needs the staging certificate", "tags": ["infra"]}, ctx))
    assert out == {"stored": True, "bank": "unit"}
    item = fake.calls("/memories")[0]["items"][0]
    assert {"session:s-tools", "source:tool", "infra"} <= set(item["tags"])
    found = json.loads(tool(provider, "hindsight_recall").invoke({"query": "VPN certificate"}, ctx))
    assert found["results"][0]["text"] == "The VPN needs the staging certificate"
    assert found["results"][0]["session"] == "s-tools"
    answer = json.loads(tool(provider, "hindsight_reflect").invoke({"query": "what about VPN?"}, ctx))
    assert answer == {"answer": "reflected on what about VPN?"}


def test_reflect_says_clearly_when_the_server_has_no_llm(provider, fake):
    fake.llm = False
    with pytest.raises(ToolError, match=r"runs without an LLM.*Use\s+hindsight_recall"):
        tool(provider, "hindsight_reflect").invoke({"query": "what do I like?"}, ToolContext())


def test_tool_errors_when_the_server_is_down(provider, fake):
    fake.down = True
    with pytest.raises(ToolError, match=r"hindsight_recall failed: cannot reach Hindsight.*carry on"):
        tool(provider, "hindsight_recall").invoke({"query": "anything"}, ToolContext())


@pytest.mark.parametrize("args", [{"query": "🚀🚀"}, {"query": ""}, {"query": "x", "extra": 1}])
def test_tool_arguments_are_validated(provider, args):
    with pytest.raises(ToolError, match="invalid arguments"):
        tool(provider, "hindsight_recall").invoke(args, ToolContext())


def test_session_end_flushes(provider, fake):
    session = Session(id="ending")
    messages = turn(provider, session, "last words")
    provider.on_session_end(session, messages, EndReason.USER_EXIT)
    assert len(fake.calls("/memories")) == 1


def test_auto_retain_and_recall_can_be_switched_off(hermes_home, fake):
    provider = build_provider(hermes_home, fake,
                              "hindsight:\n  auto_retain: false\n  auto_recall: false\n")
    turn(provider, Session(id="quiet"), "not retained")
    provider.queue_prefetch("not recalled", Session(id="quiet"))
    assert provider.prefetch("not recalled", Session(id="quiet")) is None
    provider.shutdown()
    assert fake.calls("/memories") == [] and fake.calls("/recall") == []


def test_settle_waits_for_the_servers_own_operation_status(provider, fake):
    """Issue 17 item 15: settle() trusted the bank's list of pending operations; it now waits for
    each retain it sent to reach a final state in ``GET /operations/{id}``."""
    fake.index_on_completion = True
    turn(provider, Session(id="s-ops"), "I fixed the database hang by raising the pool size")
    assert provider.retains.wait_idle(5)
    (op,) = fake.operations
    fake.operations[op] = ["pending", "processing", "processing", "completed"]
    assert provider.settle(10)
    assert fake.operations[op] == ["completed"]  # every status was read, up to the final one
    found = provider.client.recall("unit", "database hang pool size")
    assert found and "database hang" in found[0].text


def test_settle_sends_what_had_to_wait_in_the_spool(hermes_home, fake):
    """Before: a retain that failed while the server was busy went to the spool, flush() counted
    it as dealt with, and settle() reported success with the memory not stored (empty recall)."""
    provider = build_provider(hermes_home, fake, "hindsight:\n  bank: unit\n  retain_attempts: 1\n")
    fake.down = True
    turn(provider, Session(id="s-busy"), "the import froze; raising the pool size fixed it")
    assert provider.retains.wait_idle(5)
    assert len(provider.retains.spool) == 1
    fake.down = False
    assert provider.settle(10)
    assert len(provider.retains.spool) == 0
    assert [m["content"] for m in fake.memories if "pool size" in str(m["content"])]
    provider.shutdown()


def test_settle_reports_failed_operations(provider, fake):
    turn(provider, Session(id="s-fail"), "a turn the server fails to store")
    assert provider.retains.wait_idle(5)
    (op,) = fake.operations
    fake.operations[op] = ["failed"]
    assert provider.settle(10)
    assert [o for o, _error in provider.failed_operations] == [op]


def test_settle_is_bounded_when_an_operation_never_finishes(provider, fake):
    turn(provider, Session(id="s-stuck"), "a turn whose operation never finishes")
    assert provider.retains.wait_idle(5)
    (op,) = fake.operations
    fake.operations[op] = ["processing"]
    assert provider.settle(0.5) is False
