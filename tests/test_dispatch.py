"""The dispatcher: conversation keys to agents, resume from the archive, order, bounds, failures.

Real parts: the built-in session archive on a real state.db, the anthropic SDK against the loopback
Messages API. Faked: only the model's words (EchoModel in platform_support).
"""

from __future__ import annotations

import threading

import pytest
from platform_support import EchoModel, archived, host_for, user_texts

from hermes_core import IncomingMessage, MemoryProvider, Message, Session, hookimpl
from hermes_core.dispatch import ConversationDispatcher, TurnFailed, load_stored_session
from hermes_core.testing import Failure, MessagesAPIServer, Reply
from hermes_core.types import EndReason


def msg(key: str, text: str, platform: str = "webhook", **kw) -> IncomingMessage:
    return IncomingMessage(platform=platform, conversation_key=key, text=text, **kw)


def open_dispatcher(home, api, **kw) -> ConversationDispatcher:
    return ConversationDispatcher.open(host_for(home, api), **kw)


def shut(dispatcher: ConversationDispatcher) -> None:
    dispatcher.close()
    dispatcher.host.shutdown()


# ------------------------------------------------------------------------------- load_session


def test_hook_load_session(home):
    """The archive answers by key, by id and by platform, follows compaction chains, and keeps the
    session's attributes."""
    host = host_for(home, None)
    host.activate_memory_providers()
    archive = host.instances["memory-provider:session_archive"].archive
    alice = Session(id="s-alice", platform="webhook", attributes={"conversation_key": "alice",
                                                                  "user_id": "u1"})
    archive.append_message(alice, Message("user", "hello from alice"))
    archive.append_message(alice, Message("assistant", "hi alice"))
    # alice's conversation was compacted: the child holds the history it goes on from
    child = Session(id="s-alice-2", platform="webhook", parent_session_id="s-alice",
                    attributes={"conversation_key": "alice", "user_id": "u1"})
    archive.append_message(child, Message("user", "[summary] alice said hello"))
    archive.append_message(child, Message("assistant", "noted"))
    bob = Session(id="s-bob", platform="webhook", attributes={"conversation_key": "bob"})
    archive.append_message(bob, Message("user", "bob here"))
    term = Session(id="s-cli", platform="cli", attributes={"conversation_key": "cli:1"})
    archive.append_message(term, Message("user", "terminal"))

    session, history = host.pm.hook.load_session(platform="webhook", conversation_key="alice",
                                                 session_id=None)
    assert session.id == "s-alice-2" and session.parent_session_id == "s-alice"
    assert session.attributes == {"conversation_key": "alice", "user_id": "u1"}
    assert [(m.role, m.content) for m in history] == [
        ("user", "[summary] alice said hello"), ("assistant", "noted")]
    # by id: the named session's chain, newest member
    session, _ = host.pm.hook.load_session(platform="x", conversation_key=None, session_id="s-alice")
    assert session.id == "s-alice-2"
    # no key: the platform's session used last
    session, history = host.pm.hook.load_session(platform="cli", conversation_key=None,
                                                 session_id=None)
    assert session.id == "s-cli" and history[0].content == "terminal"
    # unknown key, key of another platform, unknown id: nothing
    assert host.pm.hook.load_session(platform="webhook", conversation_key="carol",
                                     session_id=None) is None
    assert host.pm.hook.load_session(platform="cli", conversation_key="alice",
                                     session_id=None) is None
    assert host.pm.hook.load_session(platform="webhook", conversation_key=None,
                                     session_id="nope") is None
    host.shutdown()


def test_a_broken_load_session_fails_the_turn_and_starts_nothing(home):
    class Broken(MemoryProvider):
        name = "broken"

        @hookimpl
        def load_session(self, platform, conversation_key, session_id):
            raise RuntimeError("disk on fire")

    with MessagesAPIServer(default=Reply(text="never")) as api:
        host = host_for(home, api)
        host.add_instance(Broken(None, None), kind="memory-provider", name="broken")
        dispatcher = ConversationDispatcher.open(host)
        with pytest.raises(TurnFailed, match="disk on fire") as info:
            dispatcher.handle(msg("alice", "hello"))
        assert info.value.failure == "load"
        assert api.bodies == []
        shut(dispatcher)
    assert archived(home) == []


def test_a_message_its_store_could_not_keep_fails_the_turn_before_the_model(home):
    """A provider whose ``on_message`` raises NotStored (its database is gone and it keeps no
    spool) fails the turn: the model is not called, the message leaves the history, and the
    sender is told to send it again; the next turn goes on as if it never came."""
    from hermes_core.errors import NotStored

    down = threading.Event()
    down.set()

    class Store(MemoryProvider):
        name = "store"

        @hookimpl
        def on_message(self, message, session):
            if down.is_set() and message.role == "user":
                raise NotStored("the database at postgresql://h:***@db/x went away")

    with MessagesAPIServer(EchoModel()) as api:
        host = host_for(home, api)
        host.add_instance(Store(None, None), kind="memory-provider", name="store")
        dispatcher = ConversationDispatcher.open(host)
        with pytest.raises(TurnFailed, match="send the message again") as info:
            dispatcher.handle(msg("alice", "first"))
        assert info.value.failure == "store" and info.value.transient
        assert "memory-provider:store" in str(info.value) and "***" in str(info.value)
        assert api.bodies == []  # the model was not called
        down.clear()
        assert dispatcher.handle(msg("alice", "second")) == "re: second (1)"
        assert user_texts(api.bodies[-1]) == ["second"]
        shut(dispatcher)


def test_load_stored_session_rejects_nonsense(home):
    class Wrong(MemoryProvider):
        name = "wrong"

        @hookimpl
        def load_session(self):
            return ["not", "a", "session"]

    host = host_for(home, None)
    host.add_instance(Wrong(None, None), kind="memory-provider", name="wrong")
    with pytest.raises(TurnFailed, match=r"load_session .*\(Session, list\[Message\]\) or None, not list"):
        load_stored_session(host, "webhook", "alice")


# ------------------------------------------------------------------------------------ turns


def test_conversation_resumes_after_a_restart(home):
    """A key maps to one session across dispatchers (a process restart): the model sees the
    earlier turns, and every message lands in that one session."""
    with MessagesAPIServer(EchoModel()) as api:
        first = open_dispatcher(home, api)
        assert first.handle(msg("alice", "my name is Alice")) == "re: my name is Alice (1)"
        assert first.handle(msg("bob", "I am Bob")) == "re: I am Bob (1)"
        shut(first)

        second = open_dispatcher(home, api)
        assert second.handle(msg("alice", "what is my name?")) == "re: what is my name? (2)"
        seen = user_texts(api.bodies[-1])
        shut(second)
    assert seen == ["my name is Alice", "what is my name?"]
    rows = archived(home)
    alice = {sid for sid, _r, key, _c in rows if key == "alice"}
    assert len(alice) == 1
    assert [c for _s, _r, key, c in rows if key == "alice"] == [
        "my name is Alice", "re: my name is Alice (1)", "what is my name?",
        "re: what is my name? (2)"]


def test_new_conversation_stores_key_user_and_attributes(home):
    with MessagesAPIServer(EchoModel()) as api:
        dispatcher = open_dispatcher(home, api)
        dispatcher.handle(msg("k1", "hi", user_id="u-7", attributes={"chat": "c-9"}))
        session = dispatcher.agent_of("webhook", "k1").session
        shut(dispatcher)
    assert session.attributes == {"chat": "c-9", "user_id": "u-7", "conversation_key": "k1"}
    host = host_for(home, None)
    host.activate_memory_providers()
    loaded, _ = load_stored_session(host, "webhook", "k1")
    assert loaded.id == session.id and loaded.attributes == session.attributes
    host.shutdown()


def test_same_key_in_order_different_keys_in_parallel(home):
    model = EchoModel(delay=0.15)
    with MessagesAPIServer(model) as api:
        dispatcher = open_dispatcher(home, api)
        replies: dict[str, str] = {}

        def send(key: str, text: str) -> None:
            replies[text] = dispatcher.handle(msg(key, text))

        # one conversation, five messages sent at once: served one at a time, in arrival order
        threads = []
        for i in range(5):
            t = threading.Thread(target=send, args=("solo", f"m{i}"))
            t.start()
            threads.append(t)
            threading.Event().wait(0.02)  # arrival order is the order handle() is called
        for t in threads:
            t.join(30)
        assert model.max_active == 1
        assert [replies[f"m{i}"] for i in range(5)] == [f"re: m{i} ({i + 1})" for i in range(5)]

        # five conversations at once: they overlap
        model.max_active = 0
        threads = [threading.Thread(target=send, args=(f"k{i}", f"hello {i}")) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert model.max_active > 1
        assert all(replies[f"hello {i}"] == f"re: hello {i} (1)" for i in range(5))
        shut(dispatcher)


def test_live_agents_are_bounded_and_evicted_ones_resume(home):
    with MessagesAPIServer(EchoModel()) as api:
        dispatcher = open_dispatcher(home, api, max_agents=2)
        for key in ("a", "b", "c", "d"):
            dispatcher.handle(msg(key, f"first {key}"))
            assert dispatcher.stats()["live_agents"] <= 2
        assert dispatcher.stats()["evictions"] == 2
        assert dispatcher.agent_of("webhook", "a") is None  # idle longest: closed
        # "a" comes back from the archive with its history
        assert dispatcher.handle(msg("a", "again")) == "re: again (2)"
        shut(dispatcher)
    rows = archived(home)
    assert len({sid for sid, _r, key, _c in rows if key == "a"}) == 1


def test_idle_sweep_closes_quiet_conversations(home):
    import time

    with MessagesAPIServer(EchoModel()) as api:
        dispatcher = open_dispatcher(home, api, idle_seconds=60)
        dispatcher.handle(msg("a", "hello"))
        assert dispatcher.sweep() == 0
        assert dispatcher.sweep(now=time.monotonic() + 61) == 1
        assert dispatcher.stats()["live_agents"] == 0
        assert dispatcher.handle(msg("a", "still there?")) == "re: still there? (2)"
        shut(dispatcher)


def test_stream_yields_the_reply_as_it_is_produced(home):
    with MessagesAPIServer([Reply(text="one two three four five", chunk_size=4)]) as api:
        dispatcher = open_dispatcher(home, api)
        chunks = list(dispatcher.stream(msg("s", "count")))
        shut(dispatcher)
    assert len(chunks) > 1 and "".join(chunks) == "one two three four five"
    assert [c for _s, _r, _k, c in archived(home)] == ["count", "one two three four five"]


def test_llm_failure_is_a_clear_turn_failure_and_the_conversation_goes_on(home):
    with MessagesAPIServer([Failure(401, "invalid x-api-key"), "better now"]) as api:
        dispatcher = open_dispatcher(home, api)
        with pytest.raises(TurnFailed, match="model call failed") as info:
            dispatcher.handle(msg("k", "first try"))
        assert info.value.failure == "auth" and not info.value.transient
        assert dispatcher.handle(msg("k", "second try")) == "better now"
        seen = user_texts(api.bodies[-1])
        api.enqueue(Failure(500, "boom", retry_after_ms=None))
        with pytest.raises(TurnFailed, match="server_error"):
            list(dispatcher.stream(msg("k", "third try")))
        shut(dispatcher)
    assert seen == ["first try", "second try"]
    # the user message was archived before the model was called; nothing was lost
    assert ("user", "first try") in [(r, c) for _s, r, _k, c in archived(home)]


def test_call_runs_in_line_and_close_refuses_new_turns(home):
    with MessagesAPIServer(EchoModel()) as api:
        dispatcher = open_dispatcher(home, api)
        dispatcher.handle(msg("k", "hello"))
        old = dispatcher.agent_of("webhook", "k").session.id
        new = dispatcher.call("webhook", "k", lambda agent: agent.new_session())
        assert new.id != old and new.attributes["conversation_key"] == "k"
        dispatcher.close(EndReason.SHUTDOWN)
        with pytest.raises(TurnFailed, match="shutting down") as info:
            dispatcher.handle(msg("k", "late"))
        assert info.value.transient
        dispatcher.host.shutdown()


def test_an_empty_conversation_key_is_refused(home):
    dispatcher = ConversationDispatcher.open(host_for(home, None))
    with pytest.raises(TurnFailed, match="non-empty") as info:
        dispatcher.handle(msg("", "hello"))
    assert info.value.failure == "invalid_key"
    shut(dispatcher)
    assert archived(home) == []


def test_activation_is_once_per_host_and_a_hand_added_provider_stops_nothing(home):
    """Agent.create twice on one host gives two agents sharing the configured providers and
    engine (it raised "name already registered"); a provider added by hand before the
    dispatcher opens sits beside the configured ones instead of replacing them."""
    from hermes_core.agent import Agent
    from hermes_core.testing import CannedLLM

    with MessagesAPIServer(EchoModel()) as api:
        host = host_for(home / "a", api)
        first = Agent.create(host, CannedLLM("one"))
        second = Agent.create(host, CannedLLM("two"))
        assert list(host.providers()) == ["memory-provider:session_archive"]
        assert second.run_turn("hello").reply == "two"
        from hermes_core.errors import PluginError

        with pytest.raises(PluginError, match=r"'session_archive' is already active on this "
                           r"host; deactivate\(\) it first") as twice:
            host.activate("memory-provider", "session_archive", config_key="memory.providers[0]")
        assert "<module" not in str(twice.value)  # names the clash, not the whole registry
        first.close(shutdown_host=False)
        second.close()

        seen: list[str] = []

        class Watcher(MemoryProvider):
            name = "watcher"

            @hookimpl
            def on_message(self, message, session):
                seen.append(message.content)

        host = host_for(home / "b", api)
        host.add_instance(Watcher(None, None), kind="memory-provider", name="watcher")
        dispatcher = ConversationDispatcher.open(host)
        assert dispatcher.handle(msg("alice", "hi")) == "re: hi (1)"
        assert sorted(host.providers()) == [
            "memory-provider:session_archive", "memory-provider:watcher"]
        assert seen == ["hi", "re: hi (1)"]
        assert [m[3] for m in archived(home / "b")] == ["hi", "re: hi (1)"]
        shut(dispatcher)
