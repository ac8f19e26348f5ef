"""Two real ``serve`` nodes, two homes, one PostgreSQL storage.url: one service.

Real parts: two ``hermes-core serve`` processes, signed HTTP on 127.0.0.1, PostgreSQL, the
anthropic SDK in each node against the loopback Messages API in the test process. Faked: only
the model's words (EchoModel: "re: <last user message> (<user messages it saw>)", so a reply
shows how much of the conversation its node saw).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from platform_support import EchoModel, user_texts
from serve_nodes import ServeNode

from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
from hermes_core.storage import close_pools, parse_storage_url
from hermes_core.testing import MessagesAPIServer, Reply

CONVERSATIONS = 20
MESSAGES = 10


def stored(url: str) -> dict[str, list[tuple[str, str]]]:
    """conversation key -> [(role, content)] in storage order, from the database."""
    archive = PgSessionArchive(parse_storage_url(url))
    out: dict[str, list[tuple[str, str]]] = {}
    rows = archive.db.read(
        "SELECT (s.attributes::jsonb) ->> 'conversation_key', m.role, m.content "
        "FROM messages AS m JOIN sessions AS s ON s.num = m.session ORDER BY m.id")
    for key, role, content in rows:
        out.setdefault(key, []).append((role, content))
    close_pools()
    return out


def test_conversations_alternating_between_two_nodes_keep_one_history(
    tmp_path: Path, pg_url: str
) -> None:
    model = EchoModel(delay=0.005)
    with MessagesAPIServer(model) as api:
        nodes = [ServeNode(tmp_path / f"node-{i}", pg_url, api.base_url) for i in range(2)]
        errors: list[str] = []
        try:
            def talk(key: str, n: int) -> None:
                for i in range(MESSAGES):
                    node = nodes[(i + n) % 2]  # alternate; half the conversations start on each
                    response = node.post({"conversation_key": key, "text": f"{key} m{i}"})
                    want = f"re: {key} m{i} ({i + 1})"
                    if response.status_code != 200 or response.json()["reply"] != want:
                        errors.append(f"{key} {i}: {response.status_code} {response.text[:200]}")

            threads = [threading.Thread(target=talk, args=(f"conv-{n:02d}", n))
                       for n in range(CONVERSATIONS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
        finally:
            for node in nodes:
                node.stop()
    assert errors == []
    assert model.max_active > 1  # conversations ran side by side
    data = stored(pg_url)
    assert len(data) == CONVERSATIONS
    for n in range(CONVERSATIONS):
        key = f"conv-{n:02d}"
        expected: list[tuple[str, str]] = []
        for i in range(MESSAGES):
            expected += [("user", f"{key} m{i}"), ("assistant", f"re: {key} m{i} ({i + 1})")]
        assert data[key] == expected, key  # each message once, in order, no interleaving


class HoldingModel:
    """Echoes like EchoModel, but holds a request whose last message says "slow" until
    released (the turn is then mid-run on its node)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.bodies.append(body)
        texts = user_texts(body)
        if texts and texts[-1].endswith("slow"):
            self.started.set()
            self.release.wait(60)
        return Reply(text=f"re: {texts[-1]} ({len(texts)})")


def test_killing_a_node_mid_turn_loses_no_accepted_message(tmp_path: Path, pg_url: str) -> None:
    model = HoldingModel()
    with MessagesAPIServer(model) as api:
        a = ServeNode(tmp_path / "node-a", pg_url, api.base_url)
        b = ServeNode(tmp_path / "node-b", pg_url, api.base_url)
        try:
            assert a.post({"conversation_key": "k", "text": "first"}).status_code == 200
            assert b.post({"conversation_key": "k", "text": "second"}).json()["reply"] == (
                "re: second (2)")
            outcome: list[Any] = []

            def slow() -> None:
                try:
                    outcome.append(a.post({"conversation_key": "k", "text": "third slow"}))
                except Exception as exc:  # the node dies under it
                    outcome.append(exc)

            sender = threading.Thread(target=slow)
            sender.start()
            assert model.started.wait(60), "the slow turn never reached the model"
            a.kill()  # kill -9 while the turn holds the conversation's lock
            sender.join(60)
            assert outcome and not (hasattr(outcome[0], "status_code")
                                    and outcome[0].status_code == 200)
            reply = b.post({"conversation_key": "k", "text": "fourth"}).json()["reply"]
            assert reply == "re: fourth (4)"  # node b saw the accepted "third slow" too
        finally:
            model.release.set()
            a.stop()
            b.stop()
    data = stored(pg_url)
    assert [c for r, c in data["k"] if r == "user"] == ["first", "second", "third slow", "fourth"]


def test_the_database_going_away_mid_turn_answers_nothing_it_did_not_store(
    tmp_path: Path, pg_url: str
) -> None:
    """The server drops every connection after the turn loaded its history and before the
    archive stored the user's message (a restart, a failover): the turn fails with
    ``failure: store`` before the model is called, and the message sent again is stored once."""
    import pytest
    from pg_support import drop_connections, settle_pool
    from platform_support import host_for

    from hermes_core import IncomingMessage, MemoryProvider, hookimpl
    from hermes_core.dispatch import ConversationDispatcher, TurnFailed
    from hermes_core.storage import get_pool

    dropped: list[int] = []

    class Outage(MemoryProvider):
        name = "outage"

        @hookimpl(tryfirst=True)  # before the archive stores the message
        def on_message(self, message, session):
            if message.content == "second" and not dropped:
                # a connection the pool is still opening in the background (it grew during the
                # first turn) would outlive the drop and store the message: wait until none is
                settle_pool(get_pool(pg_url))
                dropped.append(drop_connections(pg_url))

    with MessagesAPIServer(EchoModel()) as api:
        # a deadline the outage never reaches: the archive must run after it, on a loaded machine too
        # no embedder: the vector indexer would use the pool in the background, and a fresh
        # connection it made the pool open could store the message the outage should lose
        host = host_for(tmp_path / "home", api, f"storage:\n  url: {pg_url}\n"
                        "hooks:\n  timeouts:\n    on_message: 60\n"
                        "embeddings:\n  embedder: none\n")
        host.activate_memory_providers()  # the archive, then the outage beside it
        host.add_instance(Outage(None, None), kind="memory-provider", name="outage")
        dispatcher = ConversationDispatcher.open(host)
        try:
            def say(text: str) -> str:
                return dispatcher.handle(IncomingMessage("webhook", "gone-away", text))

            assert say("first") == "re: first (1)"
            with pytest.raises(TurnFailed, match="send the message again") as info:
                say("second")
            assert info.value.failure == "store" and info.value.transient
            assert dropped and dropped[0] >= 1
            assert len(api.bodies) == 1  # the model never saw the message nobody stored
            assert say("second") == "re: second (2)"  # sent again: goes through
        finally:
            dispatcher.close()
            host.shutdown()
    assert stored(pg_url)["gone-away"] == [
        ("user", "first"), ("assistant", "re: first (1)"),
        ("user", "second"), ("assistant", "re: second (2)")]
