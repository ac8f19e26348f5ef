"""``memory.scope: user``: every user key is a Honcho peer of its own, so alice's facts are never
recalled for bob; the global scope keeps one user peer (against the loopback server, and read back
with the real honcho-ai SDK)."""

from __future__ import annotations

import pytest
from hermes_core_honcho.config import ID_RE, user_peer_id
from honcho import Honcho

from hermes_core.errors import ToolError
from hermes_core.types import MemoryWrite, Message, Session, SwitchReason, ToolContext

WS = "test-ws"
SCOPE_USER = "memory:\n  scope: user\n"


def session_of(sid: str, user: str | None) -> Session:
    return Session(id=sid, platform="webhook", attributes={"user_id": user} if user else {})


def turn(provider, session: Session, text: str) -> None:  # type: ignore[no-untyped-def]
    provider.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW)
    provider.sync_turn(user_message=Message("user", text),
                       assistant_message=Message("assistant", "Noted."), session=session)


def recall(provider, session: Session, query: str) -> str:  # type: ignore[no-untyped-def]
    provider.queue_prefetch(query=query, session=session)
    assert provider.wait_idle(5)
    return provider.prefetch(query=query, session=session) or ""


def tool(provider, name: str):  # type: ignore[no-untyped-def]
    return next(t for t in provider.get_tools() if t.name == name)


def call(provider, name: str, session: Session, **args):  # type: ignore[no-untyped-def]
    t = tool(provider, name)
    return t.handler(t.input_model(**args), ToolContext(session=session))


@pytest.fixture
def per_user(make_provider, honcho_config):  # type: ignore[no-untyped-def]
    return make_provider(config=SCOPE_USER + honcho_config)


def test_each_user_is_a_peer_and_alices_fact_never_reaches_bob(per_user, honcho_server) -> None:  # type: ignore[no-untyped-def]
    alice, bob = session_of("s-alice", "alice"), session_of("s-bob", "bob")
    turn(per_user, alice, "I take oat milk in my coffee every morning.")
    per_user.on_memory_write(MemoryWrite("add", "user", "Alice takes oat milk", session_id="s-alice"))
    turn(per_user, bob, "My build runs on gradle.")
    assert per_user.wait_idle(5)
    a_peer, b_peer = user_peer_id("alice"), user_peer_id("bob")
    assert [m["peer_id"] for m in honcho_server.store.messages(WS, "s-alice")] == [a_peer, "hermes"]
    assert [m["peer_id"] for m in honcho_server.store.messages(WS, "s-bob")] == [b_peer, "hermes"]
    assert honcho_server.store.session_json(WS, "s-alice")["metadata"]["user_peer"] == a_peer
    assert honcho_server.store.peer_config(WS, "s-alice", a_peer) == {
        "observe_me": True, "observe_others": False}

    # read back with the real SDK: the conclusion is about alice's peer, none about bob's
    sdk = Honcho(workspace_id=WS, base_url=honcho_server.url, max_retries=0, timeout=5)
    hermes = sdk.peer("hermes")
    assert [c.content for c in hermes.conclusions_of(a_peer).list().items] == ["Alice takes oat milk"]
    assert hermes.conclusions_of(b_peer).list().items == []

    question = "what milk do I take in my coffee"
    assert "oat milk" in recall(per_user, session_of("s-alice-2", "alice"), question)
    bobs = recall(per_user, session_of("s-bob-2", "bob"), question)
    assert "oat" not in bobs
    assert b_peer in (per_user.system_prompt_block(session_of("s-bob-2", "bob")) or "")


def test_the_tools_see_only_the_calling_users_data(per_user, honcho_server) -> None:  # type: ignore[no-untyped-def]
    alice, bob = session_of("s-alice", "alice"), session_of("s-bob", "bob")
    turn(per_user, alice, "My locker code is 4711.")
    turn(per_user, bob, "I like long walks.")
    assert per_user.wait_idle(5)
    stored = call(per_user, "honcho_conclude", alice, conclusion="Alice's locker code is 4711")
    assert call(per_user, "honcho_search", alice, query="locker code")["results"]
    assert "results" not in call(per_user, "honcho_search", bob, query="locker code")
    # authored by the agent, in alice's session only: not visible from bob's
    ai_lines = call(per_user, "honcho_search", bob, query="Noted", peer="ai").get("results", [])
    assert ai_lines and all("s-alice" not in line for line in ai_lines)
    assert call(per_user, "honcho_conclude", bob, list=True)["conclusions"] == []
    with pytest.raises(ToolError, match="not this conversation's user"):
        call(per_user, "honcho_profile", bob, peer=user_peer_id("alice"))
    with pytest.raises(ToolError, match="is not one about"):
        call(per_user, "honcho_conclude", bob, delete_id=stored["stored"])
    answer = call(per_user, "honcho_reasoning", bob, query="what is the locker code")
    assert "4711" not in str(answer)
    assert "4711" in str(call(per_user, "honcho_reasoning", alice, query="what is the locker code"))
    assert call(per_user, "honcho_conclude", alice, delete_id=stored["stored"]) == {
        "deleted": stored["stored"]}


def test_notes_follow_the_session_and_unknown_sessions_are_not_mirrored(per_user,  # type: ignore[no-untyped-def]
                                                                        honcho_server) -> None:
    turn(per_user, session_of("s-alice", "alice"), "hello")
    per_user.on_memory_write(MemoryWrite("add", "user", "Is vegetarian", session_id="s-alice"))
    per_user.on_memory_write(MemoryWrite("add", "user", "Likes opera", session_id="s-unknown"))
    # no session named: the last session switched to may be another user's, so not mirrored
    turn(per_user, session_of("s-bob", "bob"), "hi")
    per_user.on_memory_write(MemoryWrite("add", "user", "Plays chess"))
    assert per_user.wait_idle(5)
    rows = honcho_server.store.list_conclusions(WS, None, 1, 100)["items"]
    assert [(r["observed_id"], r["content"]) for r in rows] == [
        (user_peer_id("alice"), "Is vegetarian")]


def test_forget_for_one_user_deletes_only_that_users_conclusions(per_user, honcho_server) -> None:  # type: ignore[no-untyped-def]
    for user in ("alice", "bob"):
        turn(per_user, session_of(f"s-{user}", user), "hi")
        per_user.on_memory_write(MemoryWrite("add", "user", f"{user} lives in Lisbon",
                                             session_id=f"s-{user}"))
    assert per_user.wait_idle(5)
    report = per_user.forget(subject="lisbon", scope="user:alice", dry_run=False)
    assert report.matched == 1 and report.deleted == 1
    left = honcho_server.store.list_conclusions(WS, None, 1, 100)["items"]
    assert [r["content"] for r in left] == ["bob lives in Lisbon"]


def test_forget_for_everyone_reaches_users_another_process_served(make_provider,  # type: ignore[no-untyped-def]
                                                                   honcho_config,
                                                                   honcho_server) -> None:
    node = make_provider(config=SCOPE_USER + honcho_config)
    for user in ("alice", "bob"):
        turn(node, session_of(f"s-{user}", user), "hi")
        node.on_memory_write(MemoryWrite("add", "user", f"{user} lives in Lisbon",
                                         session_id=f"s-{user}"))
    assert node.wait_idle(5)
    # a fresh process (another node, or after a restart) has served nobody yet
    fresh = make_provider(config=SCOPE_USER + honcho_config)
    report = fresh.forget(subject="lisbon", scope="all", dry_run=False)
    assert report.matched == 2 and report.deleted == 2
    assert honcho_server.store.list_conclusions(WS, None, 1, 100)["items"] == []


def test_global_scope_keeps_one_user_peer(make_provider, honcho_server) -> None:  # type: ignore[no-untyped-def]
    provider = make_provider()
    turn(provider, session_of("s-alice", "alice"), "I take oat milk in my coffee.")
    assert provider.wait_idle(5)
    assert [m["peer_id"] for m in honcho_server.store.messages(WS, "s-alice")] == ["user", "hermes"]
    assert "user_peer" not in honcho_server.store.session_json(WS, "s-alice")["metadata"]
    # today's behaviour: one peer for everyone, so another user's session recalls it
    assert "oat milk" in recall(provider, session_of("s-bob", "bob"), "what milk do I take")
    report = provider.forget(subject="oat", scope="user:alice", dry_run=True)
    assert "forget with scope 'all'" in (report.cannot_delete or "")


@pytest.mark.parametrize("key", ["alice", "a.b@c-d", "../../x", "名前", "x y\n", "k" * 10_000, ""])
def test_user_peer_ids_are_valid_honcho_ids_for_any_key(key: str) -> None:
    peer = user_peer_id(key)
    assert ID_RE.match(peer) and len(peer) <= 100
    assert peer == user_peer_id(key)


def test_keys_that_clean_up_alike_get_different_peers() -> None:
    keys = ["a.b", "a@b", "a_b", "a-b", "k" * 10_000, "k" * 10_001]
    assert len({user_peer_id(k) for k in keys}) == len(keys)
    crafted = user_peer_id("a.b")[len("user-"):]
    assert user_peer_id(crafted) != user_peer_id("a.b")


def test_forget_for_one_user_scrubs_only_that_users_waiting_writes(per_user, honcho_server,  # type: ignore[no-untyped-def]
                                                                    hermes_home) -> None:
    from hermes_core_honcho.testing import Fault

    honcho_server.faults.append(Fault("status", status=503))  # down: the turns wait
    alice, bob = session_of("s-alice", "alice"), session_of("s-bob", "bob")
    turn(per_user, alice, "I live in Lisbon")
    turn(per_user, bob, "I live in Lisbon too")
    assert per_user.wait_idle(5)
    honcho_server.faults.clear()
    report = per_user.forget(subject="lisbon", scope="user:alice", dry_run=False)
    assert report.deleted == 1 and report.items == ["pending message (not sent yet): I live in Lisbon"]
    per_user.outbox.deliver()
    assert per_user.wait_idle(5) and not (hermes_home / "honcho" / "outbox.jsonl").exists()
    held = {sid: [m["content"] for m in honcho_server.store.messages(WS, sid)]
            for sid in ("s-alice", "s-bob")}
    assert held == {"s-alice": ["Noted."], "s-bob": ["I live in Lisbon too", "Noted."]}
