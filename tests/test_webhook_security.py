"""The webhook against hostile clients, over real HTTP on 127.0.0.1: replays re-spelled byte by
byte, the Standard Webhooks scheme (key rotation, ``whsec_`` secrets), deeply nested JSON, and the
one secret rule shared by ``config`` and ``serve``.

Real parts: uvicorn + starlette, httpx, the session archive's state.db, the anthropic SDK against
the loopback Messages API. Faked: only the model's words (EchoModel).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import select
import socket
import time

import httpx
import pytest
from click.testing import CliRunner
from platform_support import EchoModel, archived, host_for

from hermes_core.cli import cli
from hermes_core.dispatch import connect_platform, disconnect_platform
from hermes_core.errors import ConfigError
from hermes_core.plugins.platforms.webhook import SECRET_ENV, WebhookStartError, sign
from hermes_core.testing import MessagesAPIServer

SECRET = "s3cret-for-tests-0123456789abcdef"
WHSEC_KEY = bytes(range(32))
WHSEC = "whsec_" + base64.b64encode(WHSEC_KEY).decode()


class Running:
    def __init__(self, home, api, secret: str = SECRET, extra: str = "") -> None:
        self.host = host_for(home, api, f"webhook:\n  secret: '{secret}'\n  port: 0\n{extra}")
        self.platform, self.dispatcher = connect_platform(self.host, "webhook")
        self.client = httpx.Client(base_url=self.platform.url, timeout=30)

    def post(self, body: bytes, headers: dict) -> httpx.Response:
        return self.client.post("/messages", content=body,
                                headers={"Content-Type": "application/json", **headers})

    def stop(self) -> None:
        self.client.close()
        disconnect_platform(self.host, self.platform, self.dispatcher)
        self.host.shutdown()


@pytest.fixture
def api():
    with MessagesAPIServer(EchoModel()) as server:
        yield server


def stored_user_messages(home) -> list[str]:
    return [content for _sid, role, _key, content in archived(home) if role == "user"]


def standard_signature(key: bytes, msg_id: str, ts: int, body: bytes) -> str:
    """Computed here from the specification, independently of the plugin's code."""
    mac = hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


# ------------------------------------------------------------------------------------- replays


def test_a_replay_with_bytes_appended_to_the_signature_is_refused(home, api):
    """Issue 17 item 1: 0xA0 / 0x85 appended to X-Hermes-Signature made a replay look new."""
    running = Running(home, api)
    try:
        body = json.dumps({"conversation_key": "k", "text": "pay once"}).encode()
        ts = str(int(time.time()))
        sig = sign(SECRET, ts, body).encode()
        original = running.post(body, {"X-Hermes-Timestamp": ts, "X-Hermes-Signature": sig})
        assert original.status_code == 200, original.text
        variants = {
            "exact": sig,
            "0xA0 appended": sig + b"\xa0",
            "0x85 appended": sig + b"\x85",
            "0xA0 0x85 appended": sig + b"\xa0\x85",
            "upper-case hex": b"sha256=" + sig[7:].upper(),
            "0xA0 in the timestamp": None,
        }
        refused = 0
        for name, value in variants.items():
            headers = {"X-Hermes-Timestamp": ts, "X-Hermes-Signature": value}
            if value is None:
                headers = {"X-Hermes-Timestamp": ts.encode() + b"\xa0", "X-Hermes-Signature": sig}
            response = running.post(body, headers)
            assert response.status_code in (400, 401), (name, response.status_code, response.text)
            refused += 1
            if b"\xa0" in (value or b"\xa0") or (value and b"\x85" in value):
                assert response.status_code == 400, name
                assert "ASCII" in response.json()["error"], name
            else:
                assert "already received" in response.json()["error"], name
        assert refused == len(variants)
        assert stored_user_messages(home) == ["pay once"]  # stored once, replays never
        assert len(api.bodies) == 1
    finally:
        running.stop()


def test_standard_webhooks_requests_rotation_and_replays(home, api):
    running = Running(home, api)
    try:
        body = json.dumps({"conversation_key": "std", "text": "hello standard"}).encode()
        ts = int(time.time())
        good = standard_signature(SECRET.encode(), "msg_1", ts, body)
        old_key = standard_signature(b"the-previous-key-0123456789", "msg_1", ts, body)
        headers = {"webhook-id": "msg_1", "webhook-timestamp": str(ts),
                   # key rotation: signed with the old and the new key, one match is enough
                   "webhook-signature": f"{old_key} {good}"}
        ok = running.post(body, headers)
        assert ok.status_code == 200, ok.text
        assert ok.json()["reply"] == "re: hello standard (1)"
        replays = [
            headers,
            {**headers, "webhook-signature": good},  # one signature left out
            {**headers, "webhook-signature": f"{good} {old_key}"},  # reordered
            {**headers, "webhook-signature": f"v2,abc {good}"},  # an unknown version added
            {**headers, "webhook-signature": (good + " ").encode() + b"\x85"},
        ]
        codes = [running.post(body, h).status_code for h in replays]
        assert codes == [401, 401, 401, 401, 400]
        # the id is signed: a new id with the old signature does not match
        other_id = running.post(body, {**headers, "webhook-id": "msg_2"})
        assert other_id.status_code == 401 and "no signature matches" in other_id.json()["error"]
        only_old = running.post(body, {**headers, "webhook-signature": old_key})
        assert only_old.status_code == 401
        missing = running.post(body, {"webhook-id": "msg_3", "webhook-timestamp": str(ts)})
        assert missing.status_code == 401 and "webhook-signature" in missing.json()["error"]
        assert stored_user_messages(home) == ["hello standard"]
    finally:
        running.stop()


def test_a_whsec_secret_is_the_base64_of_the_key(home, api):
    running = Running(home, api, secret=WHSEC)
    try:
        body = json.dumps({"conversation_key": "w", "text": "hi"}).encode()
        ts = int(time.time())
        headers = {"webhook-id": "msg_w", "webhook-timestamp": str(ts),
                   "webhook-signature": standard_signature(WHSEC_KEY, "msg_w", ts, body)}
        assert running.post(body, headers).status_code == 200
    finally:
        running.stop()


# ---------------------------------------------------------------------------------- bad bodies


def test_deeply_nested_json_is_a_400_not_a_500(home, api):
    """Issue 17 item 13: a RecursionError in the JSON parser escaped as a 500 with a traceback."""
    running = Running(home, api)
    try:
        depth = 100_000
        body = (b'{"conversation_key": "deep", "text": "x", "attributes": {"a": '
                + b"[" * depth + b"]" * depth + b"}}")
        ts = int(time.time())
        headers = {"X-Hermes-Timestamp": str(ts), "X-Hermes-Signature": sign(SECRET, ts, body)}
        response = running.post(body, headers)
        assert response.status_code == 400, response.text[:300]
        assert "nested too deeply" in response.json()["error"]
        assert stored_user_messages(home) == []
        assert running.client.get("/health").status_code == 200
    finally:
        running.stop()


def test_a_number_too_long_to_convert_is_a_400_not_a_500(home, api):
    """json.loads raises a plain ValueError (not a JSONDecodeError) for an integer of more than
    4300 digits; it escaped as a 500."""
    running = Running(home, api)
    try:
        body = (b'{"conversation_key": "long", "text": "x", "attributes": {"n": '
                + b"7" * 5000 + b"}}")
        ts = int(time.time())
        headers = {"X-Hermes-Timestamp": str(ts), "X-Hermes-Signature": sign(SECRET, ts, body)}
        response = running.post(body, headers)
        assert response.status_code == 400, response.text[:300]
        error = response.json()["error"]
        assert "4300 digits" in error and "as a string" in error, error
        assert stored_user_messages(home) == []
    finally:
        running.stop()


# ------------------------------------------------------------------------------- secret rule


def test_config_and_serve_apply_the_same_secret_rule(home, monkeypatch):
    """Issue 17 item 14: config accepted a 3-character secret that serve then refused."""
    monkeypatch.delenv(SECRET_ENV, raising=False)
    (home / "config.yaml").write_text("memory:\n  providers: [session_archive]\n")
    short = CliRunner().invoke(cli, ["config", "set", "webhook.secret", "abc"])
    assert short.exit_code != 0
    assert "at least 16" in short.output and "'abc'" not in short.output
    assert "secret" not in (home / "config.yaml").read_text()  # nothing written
    bad_whsec = CliRunner().invoke(cli, ["config", "set", "webhook.secret", "whsec_!!notbase64"])
    assert bad_whsec.exit_code != 0 and "base64" in bad_whsec.output
    good = CliRunner().invoke(cli, ["config", "set", "webhook.secret", SECRET])
    assert good.exit_code == 0, good.output

    # a short secret from the environment: the same rule, the same words, before anything starts
    monkeypatch.setenv(SECRET_ENV, "abc")
    host = host_for(home, None, "webhook:\n  port: 0\n")
    with pytest.raises((ConfigError, WebhookStartError), match="at least 16"):
        connect_platform(host, "webhook")
    host.shutdown()


# ---------------------------------------------------------------------------- slow connections


def _open_slow(port: int, count: int, first: bytes) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(first)
        socks.append(s)
    return socks


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (EOF or reset), without blocking."""
    sock.setblocking(False)
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 408")


def _wait_until_closed(socks: list[socket.socket], bound: float) -> int:
    """Wait (at most ``bound`` seconds) for the server to close every socket; how many it did."""
    deadline = time.monotonic() + bound
    open_ = list(socks)
    while open_ and time.monotonic() < deadline:
        open_ = [s for s in open_ if not _closed_by_server(s)]
        if open_:
            select.select(open_, [], [], 0.2)
    return len(socks) - len(open_)


def test_slow_headers_are_closed_and_health_still_answers(home, api):
    """Issue 17 item 2: connections trickling their headers stayed open forever, unsigned."""
    running = Running(home, api, extra="  header_timeout_seconds: 1\n  max_pending_connections: 50\n")
    port = int(running.platform.url.rsplit(":", 1)[1])
    socks: list[socket.socket] = []
    try:
        socks = _open_slow(port, 200, b"POST /messages HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        # a fresh client gets in while they are open: each new connection crowds out the oldest
        health = running.client.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        # every slow connection is closed by the server, within the header deadline (plus slack
        # for a loaded machine); on a server without the deadline none of them ever is
        assert _wait_until_closed(socks, bound=60) == len(socks)
        pending = running.platform.server.pending
        assert pending.evicted + pending.timed_out >= len(socks)
        assert 0 < pending.peak <= 50  # never more than the cap waited at once
        # a connection that never sends a byte is closed too
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        socks.append(silent)
        assert _wait_until_closed([silent], bound=60) == 1
        # and the server still serves signed requests
        body = json.dumps({"conversation_key": "after", "text": "still here"}).encode()
        ts = int(time.time())
        ok = running.post(body, {"webhook-id": "msg_a", "webhook-timestamp": str(ts),
                                 "webhook-signature": standard_signature(SECRET.encode(), "msg_a",
                                                                         ts, body)})
        assert ok.status_code == 200, ok.text
    finally:
        for s in socks:
            s.close()
        running.stop()


def test_a_body_that_trickles_gets_408_and_the_connection_closes(home, api):
    running = Running(home, api, extra="  body_timeout_seconds: 1\n")
    port = int(running.platform.url.rsplit(":", 1)[1])
    body = json.dumps({"conversation_key": "slow", "text": "x" * 500}).encode()
    ts = int(time.time())
    sig = standard_signature(SECRET.encode(), "msg_s", ts, body)
    head = (f"POST /messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nwebhook-id: msg_s\r\nwebhook-timestamp: {ts}\r\n"
            f"webhook-signature: {sig}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(head + body[:10])  # then nothing more
        sock.settimeout(60)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            assert chunk, f"closed without an answer: {answer!r}"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert _wait_until_closed([sock], bound=60) == 1
        assert stored_user_messages(home) == []
    finally:
        sock.close()
        running.stop()


def test_a_body_trickling_to_a_route_that_never_reads_it_is_closed(home, api):
    """/health answers without reading a body; the connection must still not stay open forever."""
    running = Running(home, api, extra="  body_timeout_seconds: 1\n")
    port = int(running.platform.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
        assert _wait_until_closed([sock], bound=60) == 1
    finally:
        sock.close()
        running.stop()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json_and_are_refused(home, api, constant):
    """json.loads accepts NaN and Infinity (not JSON, RFC 8259). A session attribute holding one
    was stored as attributes that are not JSON: on SQLite the conversation's key could no longer
    be read, so after a restart the conversation started over in a new session (its history gone
    from the agent's view); PostgreSQL's jsonb cast refuses such text outright."""
    running = Running(home, api)
    try:
        body = ('{"conversation_key": "nan", "text": "x", "attributes": {"score": '
                + constant + "}}").encode()
        ts = int(time.time())
        headers = {"X-Hermes-Timestamp": str(ts), "X-Hermes-Signature": sign(SECRET, ts, body)}
        response = running.post(body, headers)
        assert response.status_code == 400, response.text[:300]
        error = response.json()["error"]
        assert constant in error and "not valid JSON" in error, error
        assert stored_user_messages(home) == []
    finally:
        running.stop()
