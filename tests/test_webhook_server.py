"""The webhook platform over real HTTP on 127.0.0.1 (uvicorn + starlette), end to end.

Real parts: the server, httpx as the client, the session archive's state.db, the anthropic SDK
talking to the loopback Messages API. Faked: only the model's words (EchoModel).
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time

import httpx
import pytest
from platform_support import EchoModel, archived, host_for, user_texts

from hermes_core.dispatch import connect_platform, disconnect_platform
from hermes_core.plugins.platforms.webhook import (
    SECRET_ENV,
    WebhookStartError,
    sign,
    sign_standard,
    signed_headers,
)
from hermes_core.testing import Failure, MessagesAPIServer

SECRET = "s3cret-for-tests-0123456789abcdef"


class Running:
    """A webhook served from a host over ``home``; ``post`` signs unless told otherwise."""

    def __init__(self, home, api, extra: str = "") -> None:
        config = f"webhook:\n  secret: {SECRET}\n  port: 0\n{extra}"
        self.host = host_for(home, api, config)
        self.platform, self.dispatcher = connect_platform(self.host, "webhook")
        self.url = self.platform.url
        self.client = httpx.Client(base_url=self.url, timeout=180)  # a bound: turns under load

    def post(self, payload, *, path: str = "/messages", sign_it: bool = True,
             secret: str = SECRET, timestamp: int | None = None, headers=None,
             scheme: str = "standard") -> httpx.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        all_headers = {"Content-Type": "application/json"}
        if sign_it:
            all_headers.update(signed_headers(secret, body, timestamp=timestamp, scheme=scheme))
        all_headers.update(headers or {})
        return self.client.post(path, content=body, headers=all_headers)

    def stop(self) -> None:
        self.client.close()
        disconnect_platform(self.host, self.platform, self.dispatcher)
        self.host.shutdown()


@pytest.fixture
def api():
    with MessagesAPIServer(EchoModel()) as server:
        yield server


@pytest.fixture
def hook(home, api):
    running = Running(home, api)
    yield running
    running.stop()


def turn(key: str, text: str) -> dict:
    return {"conversation_key": key, "text": text}


# ------------------------------------------------------------------------------- happy path


def test_a_signed_message_gets_the_reply_and_is_archived(hook, home, api):
    response = hook.post(turn("alice", "hello"))
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["reply"] == "re: hello (1)" and data["conversation_key"] == "alice"
    assert [(r, k, c) for sid, r, k, c in archived(home)] == [
        ("user", "alice", "hello"), ("assistant", "alice", "re: hello (1)")]
    assert {sid for sid, *_ in archived(home)} == {data["session_id"]}
    assert hook.client.get("/health").json()["status"] == "ok"


def test_streaming_sends_deltas_then_done(hook, home):
    with hook.client.stream(
        "POST", "/messages/stream", content=(body := json.dumps(turn("s", "stream please")).encode()),
        headers={"Content-Type": "application/json", **signed_headers(SECRET, body)},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = "".join(response.iter_text())
    events = [(block.split("\n")[0].removeprefix("event: "),
               json.loads(block.split("\n")[1].removeprefix("data: ")))
              for block in raw.strip().split("\n\n")]
    names = [name for name, _ in events]
    assert names[-1] == "done" and names.count("delta") > 1
    deltas = "".join(data["text"] for name, data in events if name == "delta")
    assert deltas == events[-1][1]["reply"] == "re: stream please (1)"


# --------------------------------------------------------------------------------- refusals


def test_unsigned_wrongly_signed_stale_swapped_and_replayed_requests_get_401(hook, home, api):
    body = json.dumps(turn("mallory", "let me in")).encode()
    now = int(time.time())
    cases = {
        "unsigned": hook.post(body, sign_it=False),
        "wrong secret": hook.post(body, secret="not-the-secret-at-all-000"),
        "stale": hook.post(body, timestamp=now - 301),
        # well past the 300 s bound: the server reads its clock after the requests above,
        # which may take a second or more on a loaded machine (now + 301 was then accepted)
        "future": hook.post(body, timestamp=now + 400),
        "garbage timestamp": hook.post(body, scheme="hermes",
                                       headers={"X-Hermes-Timestamp": "yesterday"}),
        "garbage webhook-timestamp": hook.post(body, headers={"webhook-timestamp": "yesterday"}),
        "hermes wrong secret": hook.post(body, secret="not-the-secret-at-all-000", scheme="hermes"),
        "hermes stale": hook.post(body, timestamp=now - 301, scheme="hermes"),
        # a captured signature with a fresh timestamp: the timestamp is part of what is signed
        "swapped timestamp": hook.post(body, sign_it=False, headers={
            "X-Hermes-Timestamp": str(now), "X-Hermes-Signature": sign(SECRET, now - 400, body)}),
        "body changed": hook.post(body.replace(b"let me in", b"let me out"), sign_it=False,
                                  headers=signed_headers(SECRET, body)),
    }
    for name, response in cases.items():
        assert response.status_code == 401, (name, response.text)
        assert response.json()["error"], name
    assert "missing header" in cases["unsigned"].json()["error"]
    assert "s old" in cases["stale"].json()["error"]
    assert "does not match" in cases["swapped timestamp"].json()["error"]

    # the same signed request twice: served once
    headers = signed_headers(SECRET, body)
    first = hook.post(body, sign_it=False, headers=headers)
    second = hook.post(body, sign_it=False, headers=headers)
    assert first.status_code == 200 and second.status_code == 401
    assert "already received" in second.json()["error"]
    # only the one accepted request reached the model and the archive
    assert len(api.bodies) == 1
    assert [c for _s, _r, _k, c in archived(home)] == ["let me in", "re: let me in (1)"]


def test_nothing_is_stored_for_refused_requests(hook, home, api):
    body = json.dumps(turn("mallory", "x")).encode()
    assert hook.post(body, sign_it=False).status_code == 401
    assert hook.post(body, timestamp=int(time.time()) - 1000).status_code == 401
    assert hook.post(b"{not json", ).status_code == 400
    assert archived(home) == [] and api.bodies == []


def test_oversize_bodies_get_413_declared_or_chunked(home, api):
    running = Running(home, api, extra="  max_body_bytes: 2048\n")
    try:
        big = json.dumps(turn("k", "x" * 5000)).encode()
        assert running.post(big).status_code == 413
        unsigned = running.post(big, sign_it=False)
        assert unsigned.status_code == 413 and "2048" in unsigned.json()["error"]

        def chunks():  # no Content-Length: the server counts while reading
            for i in range(0, len(big), 1000):
                yield big[i:i + 1000]

        chunked = running.client.post("/messages", content=chunks(), headers={
            "Content-Type": "application/json", **signed_headers(SECRET, big)})
        assert chunked.status_code == 413
        assert "chunked" in chunked.request.headers.get("transfer-encoding", "")
    finally:
        running.stop()
    assert archived(home) == [] and api.bodies == []


def test_bad_json_and_bad_fields_get_400_and_422_naming_the_field(hook, home, api):
    junk = hook.post(b"this is not json")
    assert junk.status_code == 400 and "not valid JSON" in junk.json()["error"]
    array = hook.post([1, 2])
    assert array.status_code == 400 and "JSON object" in array.json()["error"]

    missing = hook.post({"text": "no key"})
    assert missing.status_code == 422
    assert missing.json()["fields"] == ["conversation_key"]
    assert "conversation_key" in missing.json()["error"]
    for bad_key in ("", "line\nbreak", 42, "k" * 300):
        response = hook.post({"conversation_key": bad_key, "text": "hi"})
        assert response.status_code == 422, bad_key
        assert "conversation_key" in response.json()["error"]
    no_text = hook.post({"conversation_key": "k"})
    assert no_text.status_code == 422 and no_text.json()["fields"] == ["text"]
    extra = hook.post({"conversation_key": "k", "text": "hi", "stream": True})
    assert extra.status_code == 422 and "stream" in extra.json()["error"]
    assert archived(home) == [] and api.bodies == []


def test_a_model_failure_is_a_502_with_the_reason_and_the_server_goes_on(home, caplog):
    caplog.set_level(logging.INFO, logger="hermes_core.plugins.webhook.access")
    with MessagesAPIServer([Failure(529, "overloaded", retry_after_ms=None), "fine now"]) as api:
        running = Running(home, api)
        try:
            failed = running.post(turn("k", "first"))
            assert failed.status_code == 502
            assert failed.json()["failure"] == "overloaded" and failed.json()["transient"] is True
            ok = running.post(turn("k", "second"))
            assert ok.status_code == 200 and ok.json()["reply"] == "fine now"
            bad = running.post(b"{not json")
            assert bad.status_code == 400
        finally:
            running.stop()
    # the access log: one line per request, a 5xx as a warning with the failure the client got
    access = [r for r in caplog.records if r.name == "hermes_core.plugins.webhook.access"]
    lines = [(r.levelno, re.search(r'"(POST \S+)" (\d{3}) ', r.getMessage()).groups())  # type: ignore[union-attr]
             for r in access]
    assert lines == [(logging.WARNING, ("POST /messages", "502")),
                     (logging.INFO, ("POST /messages", "200")),
                     (logging.INFO, ("POST /messages", "400"))]
    assert access[0].getMessage().endswith("ms: overloaded: " + failed.json()["error"])
    assert "not valid JSON" in access[2].getMessage() and "ms: " not in access[1].getMessage()


def test_a_message_the_store_could_not_keep_is_a_503_to_send_again(home, api):
    from hermes_core import MemoryProvider, hookimpl
    from hermes_core.errors import NotStored

    class Gone(MemoryProvider):
        name = "gone"

        @hookimpl
        def on_message(self, message, session):
            raise NotStored("the database went away")

    running = Running(home, api)
    try:
        running.host.add_instance(Gone(None, None), kind="memory-provider", name="gone")
        failed = running.post(turn("k", "first"))
        assert failed.status_code == 503
        body = failed.json()
        assert body["failure"] == "store" and body["transient"] is True
        assert "send the message again" in body["error"]
        assert api.bodies == []
    finally:
        running.stop()


# ------------------------------------------------------------------------- starting, stopping


def test_the_server_refuses_to_start_without_a_secret(home, monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    host = host_for(home, None, "webhook:\n  port: 0\n")
    with pytest.raises(WebhookStartError, match=SECRET_ENV) as info:
        connect_platform(host, "webhook")
    assert "webhook.secret" in str(info.value)
    host.shutdown()


def test_the_secret_comes_from_the_environment(home, api, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    host = host_for(home, api, "webhook:\n  port: 0\n")
    platform, dispatcher = connect_platform(host, "webhook")
    try:
        body = json.dumps(turn("env", "hi")).encode()
        response = httpx.post(f"{platform.url}/messages", content=body, timeout=30,
                              headers=signed_headers(SECRET, body))
        assert response.status_code == 200
    finally:
        disconnect_platform(host, platform, dispatcher)
        host.shutdown()


def test_a_port_in_use_is_a_clear_error(home):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    host = host_for(home, None, f"webhook:\n  secret: {SECRET}\n  port: {port}\n")
    try:
        with pytest.raises(WebhookStartError, match=f"port {port} on 127.0.0.1 is already in use"):
            connect_platform(host, "webhook")
    finally:
        taken.close()
        host.shutdown()


def test_a_restart_continues_each_conversation(home, api):
    first = Running(home, api)
    assert first.post(turn("alice", "my name is Alice")).status_code == 200
    assert first.post(turn("bob", "my name is Bob")).status_code == 200
    first.stop()

    second = Running(home, api)  # a new host, dispatcher and server: nothing kept in memory
    try:
        reply = second.post(turn("alice", "what is my name?")).json()["reply"]
        alice_saw = user_texts(api.bodies[-1])
        second.post(turn("bob", "and mine?"))
        bob_saw = user_texts(api.bodies[-1])
    finally:
        second.stop()
    assert reply == "re: what is my name? (2)"
    assert alice_saw == ["my name is Alice", "what is my name?"]
    assert bob_saw == ["my name is Bob", "and mine?"]
    sessions = {}
    for sid, _r, key, _c in archived(home):
        sessions.setdefault(key, set()).add(sid)
    assert all(len(ids) == 1 for ids in sessions.values())


# ------------------------------------------------------------------------------ concurrency


def test_twenty_conversations_times_five_messages_each_archived_once_in_order(home):
    model = EchoModel(delay=0.01)
    with MessagesAPIServer(model) as api:
        running = Running(home, api)
        errors: list[str] = []

        def talk(key: str) -> None:
            for i in range(5):
                response = running.post(turn(key, f"{key} message {i}"))
                if response.status_code != 200 or response.json()["reply"] != (
                        f"re: {key} message {i} ({i + 1})"):
                    errors.append(f"{key} {i}: {response.status_code} {response.text}")

        threads = [threading.Thread(target=talk, args=(f"conv-{n:02d}",)) for n in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        running.stop()
    assert errors == []
    assert model.max_active > 1  # conversations really ran side by side
    rows = archived(home)
    assert len(rows) == 200
    for n in range(20):
        key = f"conv-{n:02d}"
        mine = [(sid, role, content) for sid, role, k, content in rows if k == key]
        assert len({sid for sid, _r, _c in mine}) == 1, key
        expected = []
        for i in range(5):
            expected += [("user", f"{key} message {i}"), ("assistant", f"re: {key} message {i} ({i + 1})")]
        assert [(r, c) for _s, r, c in mine] == expected


def test_concurrent_requests_on_one_conversation_are_served_one_at_a_time(home):
    model = EchoModel(delay=0.05)
    with MessagesAPIServer(model) as api:
        running = Running(home, api)
        replies: list[str] = []

        def send(i: int) -> None:
            replies.append(running.post(turn("one", f"m{i}")).json()["reply"])

        threads = [threading.Thread(target=send, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        running.stop()
    assert model.max_active == 1
    # each was answered once, each seeing all the ones before it
    assert sorted(int(r.rsplit("(", 1)[1].rstrip(")")) for r in replies) == [1, 2, 3, 4, 5]
    contents = [c for _s, r, _k, c in archived(home) if r == "user"]
    assert sorted(contents) == [f"m{i}" for i in range(5)]


def test_send_posts_signed_messages_to_the_outbound_url(home):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    received: list[tuple[dict, dict]] = []

    class Receiver(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((json.loads(body), dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        host = host_for(home, None, f"webhook:\n  secret: {SECRET}\n  outbound_url: "
                                    f"http://127.0.0.1:{server.server_address[1]}/in\n")
        platform = host.activate("platform", "webhook", config_key="webhook")
        outcome = host.hooks.send(conversation_key="alice", text="reminder: tea")
        assert [o.value for o in outcome] == [{"status": 204}]
        payload, headers, raw = received[0]
        assert payload == {"conversation_key": "alice", "text": "reminder: tea"}
        # the documented default: Standard Webhooks
        assert headers["webhook-signature"] == sign_standard(
            SECRET, headers["webhook-id"], headers["webhook-timestamp"], raw)
        host.deactivate(platform)
        host.shutdown()
    finally:
        server.shutdown()
        server.server_close()


def test_send_without_an_outbound_url_is_a_clear_error(home):
    host = host_for(home, None, f"webhook:\n  secret: {SECRET}\n")
    host.activate("platform", "webhook", config_key="webhook")
    outcome = host.hooks.send(conversation_key="alice", text="hi")
    assert "webhook.outbound_url" in str(outcome[0].error)
    host.shutdown()


def test_accepted_connections_have_tcp_nodelay() -> None:
    """The listener is made with the proto getaddrinfo gives (IPPROTO_TCP): asyncio sets
    TCP_NODELAY only on connections a listener of that proto accepts, and a response written as
    headers then body otherwise waits for the client's delayed ACK (~40 ms per keep-alive
    request on loopback)."""
    import asyncio

    from hermes_core.plugins.platforms.webhook.server import _bind

    listener = _bind("127.0.0.1", 0)
    assert listener.proto == socket.IPPROTO_TCP

    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
        async with server:
            _reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
            try:
                return await asyncio.wait_for(accepted, 10)
            finally:
                writer.close()

    assert asyncio.run(accept_one()) != 0
