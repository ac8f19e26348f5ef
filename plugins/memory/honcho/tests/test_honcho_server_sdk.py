"""The loopback server driven by the real honcho-ai SDK.

The SDK validates every answer with its own pydantic models, so each call here fails if the server
drifts from Honcho's wire format; the status codes and error classes are the ones the SDK maps from
the real server's answers.
"""

from __future__ import annotations

import sqlite3
import time

import httpx
import pytest
from hermes_core_honcho.testing import Fault, HonchoTestServer
from honcho import Honcho
from honcho.api_types import SessionPeerConfig
from honcho.http import exceptions as hx


@pytest.fixture
def honcho(honcho_server: HonchoTestServer) -> Honcho:
    return Honcho(workspace_id="ws", base_url=honcho_server.url, api_key="test-key", max_retries=0,
                  timeout=5)


def test_get_or_create_and_session_peers(honcho: Honcho, honcho_server: HonchoTestServer) -> None:
    alice, bot = honcho.peer("alice", metadata={"k": 1}), honcho.peer("bot")
    again = honcho.peer("alice")
    assert again.id == "alice" and alice.get_metadata() == {"k": 1}
    session = honcho.session("s-1", metadata={"topic": "db"})
    session.add_peers([alice, (bot, SessionPeerConfig(observe_me=False, observe_others=True))])
    config = session.get_peer_configuration(bot)
    assert (config.observe_me, config.observe_others) == (False, True)
    assert session.get_metadata() == {"topic": "db"}
    assert {r.status for r in honcho_server.requests_to("POST", r"/peers$")} == {200}
    assert honcho_server.requests[0].headers["authorization"] == "Bearer test-key"


def test_messages_are_201_and_searchable_by_rank(honcho: Honcho,
                                                  honcho_server: HonchoTestServer) -> None:
    alice, bot = honcho.peer("alice"), honcho.peer("bot")
    session = honcho.session("s-1")
    stored = session.add_messages([
        alice.message("I fixed the database hang by raising the pool size to 40."),
        bot.message("Good. The pool was exhausted by the nightly ETL."),
        alice.message("My cat knocked a glass of water off the kitchen table."),
    ])
    assert [m.peer_id for m in stored] == ["alice", "bot", "alice"]
    assert honcho_server.requests_to("POST", r"/messages$")[0].status == 201
    hits = honcho.search("how did we fix the database hang?", limit=5)
    assert hits and "pool size" in hits[0].content
    assert all("cat" not in h.content for h in hits)
    mine = alice.search("pool")
    assert [m.peer_id for m in mine] == ["alice"]
    # the data is in a real SQLite file
    rows = sqlite3.connect(honcho_server.db_path).execute("SELECT count(*) FROM messages").fetchone()
    assert rows == (3,)


def test_context_summary_representation_and_card(tmp_path) -> None:
    with HonchoTestServer(tmp_path / "db.sqlite", summary_every=4) as server:
        honcho = Honcho(workspace_id="ws", base_url=server.url, max_retries=0)
        alice, bot = honcho.peer("alice"), honcho.peer("bot")
        session = honcho.session("s-1")
        session.add_peers([alice, bot])
        ctx = session.context(summary=True, peer_target="alice", peer_perspective="bot")
        assert ctx.summary is None and ctx.peer_representation in (None, "")
        session.add_messages([alice.message(f"Message number {i}. More text.") for i in range(4)])
        bot.conclusions_of("alice").create([{"content": "Alice prefers tea over coffee",
                                             "session_id": "s-1"}])
        bot.set_card(["Name: Alice", "Drinks tea"], target="alice")
        ctx = session.context(summary=True, peer_target="alice", peer_perspective="bot",
                              search_query="what does alice drink")
        assert ctx.summary is not None and "Message number 0" in ctx.summary.content
        assert "prefers tea" in (ctx.peer_representation or "")
        assert ctx.peer_card == ["Name: Alice", "Drinks tea"]
        assert bot.get_card(target="alice") == ["Name: Alice", "Drinks tea"]
        assert "prefers tea" in bot.representation(target="alice", search_query="drink")
        peer_ctx = bot.context(target="alice", search_query="tea")
        assert peer_ctx.target_id == "alice" and "tea" in (peer_ctx.representation or "")


def test_dialectic_is_extractive_and_null_without_evidence(honcho: Honcho) -> None:
    alice, bot = honcho.peer("alice"), honcho.peer("bot")
    session = honcho.session("s-1")
    session.add_messages([alice.message("We deploy the billing service every Tuesday. I use Helix."),
                          bot.message("Tuesday deploys noted.")])
    answer = bot.chat("which editor does the user use?", target="alice")
    assert answer is not None and "Helix" in answer
    assert bot.chat("favourite mountain range", target="alice") is None


def test_conclusions_create_list_query_delete(honcho: Honcho,
                                              honcho_server: HonchoTestServer) -> None:
    alice, bot = honcho.peer("alice"), honcho.peer("bot")
    honcho.session("s-1")
    view = bot.conclusions_of(alice)
    made = view.create([{"content": "Works in Rotterdam"}, {"content": "Prefers short answers"}])
    assert [c.content for c in made] == ["Works in Rotterdam", "Prefers short answers"]
    assert honcho_server.requests_to("POST", r"/conclusions$")[0].status == 201
    page = view.list(size=1)
    assert page.total == 2 and page.pages == 2 and len(page.items) == 1
    assert [c.content for c in view.query("short answers", top_k=5)] == ["Prefers short answers"]
    view.delete(made[0].id)
    assert honcho_server.requests_to("DELETE", r"/conclusions/")[0].status == 204
    assert [c.content for c in view.list().items] == ["Prefers short answers"]
    with pytest.raises(hx.NotFoundError):
        view.delete(made[0].id)


def test_upload_and_queue_status(honcho: Honcho) -> None:
    alice = honcho.peer("alice")
    session = honcho.session("s-1")
    made = session.upload_file(file=("notes.txt", b"Remember the Q3 roadmap review.", "text/plain"),
                               peer=alice, metadata={"source": "upload"})
    assert made[0].content == "Remember the Q3 roadmap review." and made[0].metadata == {
        "source": "upload"}
    status = honcho.queue_status()
    assert status.pending_work_units == 0


def test_errors_are_honchos(honcho: Honcho, honcho_server: HonchoTestServer) -> None:
    honcho.peer("alice")
    with pytest.raises(hx.NotFoundError):
        honcho.session("nope").get_peer_configuration("alice")
    # invalid ids: 422 with FastAPI's detail list
    response = httpx.post(f"{honcho_server.url}/v3/workspaces", json={"id": "bad id!"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "id"]
    response = httpx.post(f"{honcho_server.url}/v3/workspaces/ws/sessions/x/messages",
                          json={"messages": []})
    assert response.status_code == 422
    assert httpx.get(f"{honcho_server.url}/v3/nowhere").json() == {"detail": "Not Found"}


def test_api_key_is_checked_when_configured(tmp_path) -> None:
    with HonchoTestServer(tmp_path / "db.sqlite", api_key="right") as server:
        with pytest.raises(hx.AuthenticationError):
            Honcho(workspace_id="ws", base_url=server.url, api_key="wrong", max_retries=0).peer("a")
        Honcho(workspace_id="ws", base_url=server.url, api_key="right", max_retries=0).peer("a")


@pytest.mark.parametrize(("fault", "error"), [
    (Fault("status", status=429, retry_after=0), hx.RateLimitError),
    (Fault("status", status=500), hx.ServerError),
    (Fault("status", status=503), hx.ServerError),
    (Fault("drop"), hx.ConnectionError),
])
def test_fault_switches(honcho: Honcho, honcho_server: HonchoTestServer, fault: Fault,
                        error: type[Exception]) -> None:
    honcho.peer("alice")
    honcho_server.faults.append(fault)
    with pytest.raises(error):
        honcho.peer("bob")
    honcho_server.faults.clear()
    assert honcho.peer("bob").id == "bob"


def test_sdk_retries_through_transient_faults(honcho_server: HonchoTestServer) -> None:
    honcho = Honcho(workspace_id="ws", base_url=honcho_server.url, max_retries=2)
    honcho_server.faults.append(Fault("status", status=503, times=2))
    assert honcho.peer("alice").id == "alice"
    assert [r.status for r in honcho_server.requests] == [503, 503, 200, 200]


def test_latency_and_junk(honcho_server: HonchoTestServer) -> None:
    honcho = Honcho(workspace_id="ws", base_url=honcho_server.url, max_retries=0, timeout=0.2)
    honcho_server.latency = 0.5
    start = time.perf_counter()
    with pytest.raises(hx.TimeoutError):
        honcho.peer("alice")
    assert time.perf_counter() - start < 0.45
    honcho_server.latency = 0.0
    honcho_server.faults.append(Fault("junk"))
    with pytest.raises(Exception) as info:  # the SDK's own models refuse the wrong shape
        Honcho(workspace_id="ws2", base_url=honcho_server.url, max_retries=0).peer("alice")
    assert "validation error" in str(info.value).lower()


def test_control_endpoint_sets_faults(honcho_server: HonchoTestServer) -> None:
    url = f"{honcho_server.url}/_control/faults"
    assert httpx.post(url, json={"faults": [{"kind": "status", "status": 502, "times": 1}]}).json() == {
        "faults": 1, "latency": 0.0}
    assert httpx.post(f"{honcho_server.url}/v3/workspaces", json={"id": "w"}).status_code == 502
    assert httpx.post(f"{honcho_server.url}/v3/workspaces", json={"id": "w"}).status_code == 200
    assert httpx.delete(url).status_code == 204
