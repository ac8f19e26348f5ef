"""``memory.scope: user``: every user key has a bank of its own, so one user's facts are never
recalled for another; the global scope keeps the one configured bank (against the stand-in)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hermes_core_hindsight import HindsightMemory
from hermes_core_hindsight.config import user_bank

from hermes_core.types import MemoryWrite, Message, Session, SwitchReason, ToolContext

from .conftest import FakeHindsight, build_provider

PER_USER = "memory:\n  scope: user\nhindsight:\n  bank: unit\n"
BANK_RULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


def user_session(sid: str, user: str | None) -> Session:
    return Session(id=sid, platform="webhook", attributes={"user_id": user} if user else {})


def say(provider: HindsightMemory, session: Session, text: str) -> None:
    user, assistant = Message("user", text), Message("assistant", "Noted.")
    provider.sync_turn(user, assistant, session, [user, assistant])


def recalled(provider: HindsightMemory, session: Session, query: str) -> str:
    provider.queue_prefetch(query, session)
    assert provider.prefetcher.idle(5)
    return provider.prefetch(query, session) or ""


@pytest.fixture
def per_user(hermes_home: Path, fake: FakeHindsight):  # type: ignore[no-untyped-def]
    instance = build_provider(hermes_home, fake, PER_USER)
    yield instance
    instance.shutdown()


def test_alices_fact_is_recalled_for_alice_and_never_for_bob(per_user, fake):
    alice, bob = user_session("s-alice", "alice"), user_session("s-bob", "bob")
    say(per_user, alice, "I always drink jasmine tea in the morning")
    say(per_user, bob, "my build uses gradle")
    assert per_user.retains.wait_idle(5)
    banks = {body["items"][0]["content"].split("\n")[0]: body_bank
             for body, body_bank in zip(fake.calls("/memories"),
                                        [m["bank"] for m in fake.memories], strict=True)}
    assert banks["User: I always drink jasmine tea in the morning"] == user_bank("unit", "alice")
    assert banks["User: my build uses gradle"] == user_bank("unit", "bob")
    assert "unit" not in {m["bank"] for m in fake.memories}

    question = "which tea do I drink in the morning"
    assert "jasmine" in recalled(per_user, user_session("s-alice-2", "alice"), question)
    assert "jasmine" not in recalled(per_user, user_session("s-bob-2", "bob"), question)
    # the prompt names the user's own bank
    assert user_bank("unit", "bob") in (per_user.system_prompt_block(bob) or "")


def test_the_tools_use_the_calling_sessions_bank(per_user, fake):
    tools = {t.name: t for t in per_user.get_tools()}
    alice = ToolContext(session=user_session("s-a", "alice"))
    bob = ToolContext(session=user_session("s-b", "bob"))
    stored = tools["hindsight_retain"].handler(
        tools["hindsight_retain"].input_model(content="my locker code is 4711"), alice)
    assert stored["bank"] == user_bank("unit", "alice")
    query = tools["hindsight_recall"].input_model(query="what is my locker code")
    assert tools["hindsight_recall"].handler(query, bob)["results"] == []
    found = tools["hindsight_recall"].handler(query, alice)["results"]
    assert any("4711" in r["text"] for r in found)
    answer = tools["hindsight_reflect"].handler(
        tools["hindsight_reflect"].input_model(query="locker code"), bob)
    assert answer["answer"]
    assert [path for _m, path, _b, _h in fake.requests if path.endswith("/reflect")] == [
        f"/v1/default/banks/{user_bank('unit', 'bob')}/reflect"]


def test_a_note_goes_to_the_bank_of_the_session_it_was_written_in(per_user, fake):
    alice = user_session("s-alice", "alice")
    per_user.on_session_switch(alice, None, SwitchReason.NEW)
    per_user.on_memory_write(MemoryWrite("add", "user", "Alice is vegetarian", session_id="s-alice"))
    # a session the provider never saw: its user is unknown, so the note is not mirrored at all
    per_user.on_memory_write(MemoryWrite("add", "user", "Someone likes opera", session_id="s-x"))
    assert per_user.retains.wait_idle(5)
    assert [(m["bank"], m["content"]) for m in fake.memories] == [
        (user_bank("unit", "alice"), "Alice is vegetarian")]


def test_forget_for_one_user_looks_only_in_that_users_bank(per_user, fake):
    say(per_user, user_session("s-a", "alice"), "I moved to Lisbon")
    say(per_user, user_session("s-b", "bob"), "I visited Lisbon once")
    assert per_user.retains.wait_idle(5)
    report = per_user.forget(subject="lisbon", scope="user:alice", dry_run=True)
    assert report.matched == 1 and "moved" in report.items[0]
    everyone = per_user.forget(subject="lisbon", scope="all", dry_run=True)
    assert everyone.matched == 2


def test_forget_for_everyone_finds_users_another_process_served(per_user, fake, hermes_home):
    say(per_user, user_session("s-a", "alice"), "I moved to Lisbon")
    say(per_user, user_session("s-b", "bob"), "I visited Lisbon once")
    assert per_user.retains.wait_idle(5)
    fresh = build_provider(hermes_home, fake, PER_USER)  # another node, or after a restart
    try:
        everyone = fresh.forget(subject="lisbon", scope="all", dry_run=True)
        assert everyone.matched == 2
        assert {user_bank("unit", "alice"), user_bank("unit", "bob")} <= set(
            fresh.client.bank_ids(search="unit.user.", page=1))  # paged one bank at a time
    finally:
        fresh.shutdown()


def test_global_scope_keeps_one_bank_whatever_the_user(provider, fake):
    say(provider, user_session("s-alice", "alice"), "I always drink jasmine tea")
    assert provider.retains.wait_idle(5)
    assert {m["bank"] for m in fake.memories} == {"unit"}
    # today's behaviour: everyone shares the bank, so another user's session recalls it too
    assert "jasmine" in recalled(provider, user_session("s-bob", "bob"), "which tea do I drink")
    report = provider.forget(subject="jasmine", scope="user:alice", dry_run=True)
    assert report.matched == 1  # one bank for everyone: what it holds, as before


@pytest.mark.parametrize("key", [
    "alice", "alice@example.org", "a.b-c_d", "../../etc/passwd", "名前", "x y\tz\n",
    "k" * 10_000, "",
])
def test_user_bank_ids_are_valid_and_bounded_for_any_key(key):
    bank = user_bank("unit", key)
    assert BANK_RULE.match(bank) and len(bank) <= 128
    assert bank == user_bank("unit", key)  # stable across processes and nodes


def test_keys_that_clean_up_alike_still_get_different_banks():
    keys = ["alice.x", "alice@x", "alice_x", "alice-x", "k" * 10_000, "k" * 10_001]
    assert len({user_bank("unit", k) for k in keys}) == len(keys)
    # a key crafted to equal another's readable part does not reach that bank
    crafted = user_bank("unit", "alice.x").split(".user.", 1)[1]
    assert user_bank("unit", crafted) != user_bank("unit", "alice.x")
