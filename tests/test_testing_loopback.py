"""The kit's loopback server base: binding, the request log, faults (status, drop, reset, a
delay cut short by stop) and a clean stop."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from hermes_core.testing.loopback import LoopbackHandler, LoopbackServer


class _Handler(LoopbackHandler):
    api: _Server

    def do_POST(self) -> None:
        raw = self.read_body()
        record = self.record(json.loads(raw) if raw else None, headers={"x-absent": ""})
        action = (record.body or {}).get("do", "echo")
        if action == "drop":
            self.drop()
        elif action == "reset":
            self.drop(reset=True)
        elif action == "wait":
            self.api.waiting.set()
            still_running = self.api.wait(60)
            self.api.outcome.append(still_running)
            if still_running:
                self.send_json(200, {"late": True})
            else:
                self.drop()
        elif action == "hang up":
            raise ConnectionResetError("the client went away")
        elif action == "bug":
            raise ValueError("a bug in the handler")
        else:
            self.send_json(int(record.query.get("status", 200)), record.body,
                           {"retry-after": "1"})

    do_DELETE = do_POST


class _Server(LoopbackServer):
    handler = _Handler

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()
        self.outcome: list[bool] = []


def test_it_binds_loopback_on_an_ephemeral_port_and_records_every_request() -> None:
    with _Server() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}" and server.port > 0
        answer = httpx.post(f"{server.base_url}/v1/things?page=2&page=3&size=5",
                            json={"a": 1}, headers={"X-Test": "yes"})
        assert answer.status_code == 200 and answer.json() == {"a": 1}
        assert answer.headers["retry-after"] == "1"
        empty = httpx.delete(f"{server.base_url}/gone?status=204")
        assert empty.status_code == 204 and empty.content == b""
        first, second = server.requests
        assert (first.method, first.path, first.query) == ("POST", "/v1/things",
                                                           {"page": "3", "size": "5"})
        assert first.body == {"a": 1} and first.status == 200
        assert first.headers["x-test"] == "yes" and first.headers["x-absent"] == ""
        assert (second.method, second.body, second.status) == ("DELETE", None, 204)


def test_any_status_is_answered_and_recorded() -> None:
    with _Server() as server:
        answer = httpx.post(f"{server.base_url}/x?status=503", json={"detail": "down"})
        assert answer.status_code == 503 and answer.json() == {"detail": "down"}
        assert server.requests[0].status == 503


@pytest.mark.parametrize("action", ["drop", "reset"])
def test_a_dropped_or_reset_connection_gets_no_answer(action: str) -> None:
    with _Server() as server, pytest.raises(httpx.TransportError):
        httpx.post(server.base_url, json={"do": action})
    assert server.requests[0].status == 0


def test_stop_cuts_a_waiting_answer_short() -> None:
    server = _Server().start()
    failures: list[BaseException] = []

    def call() -> None:
        try:
            httpx.post(server.base_url, json={"do": "wait"}, timeout=60)
        except httpx.TransportError as exc:
            failures.append(exc)

    client = threading.Thread(target=call)
    client.start()
    assert server.waiting.wait(10)
    began = time.monotonic()
    server.stop()
    client.join(30)
    assert not client.is_alive() and time.monotonic() - began < 30
    assert server.outcome == [False] and len(failures) == 1  # dropped, not answered late


def test_start_and_stop_are_safe_to_repeat_and_the_port_closes() -> None:
    server = _Server()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port
    server.stop()  # never started: nothing to do
    for _ in range(20):
        assert server.start() is server.start()  # the second start does nothing
        port = server.port
        server.stop()
        server.stop()
        with pytest.raises(httpx.ConnectError):
            httpx.post(f"http://127.0.0.1:{port}", json={})


def _raw_post(port: int, body: dict[str, str]) -> bytes:
    """POST ``body`` on a raw socket and read until the server closes the connection (which
    it does only after its error handling has run)."""
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(data), data))
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
        return received


def test_a_client_hanging_up_is_quiet_and_a_handler_bug_is_not(
        capfd: pytest.CaptureFixture[str]) -> None:
    with _Server() as server:
        assert _raw_post(server.port, {"do": "hang up"}) == b""
        assert "Traceback" not in capfd.readouterr().err
        assert _raw_post(server.port, {"do": "bug"}) == b""
        assert "ValueError: a bug in the handler" in capfd.readouterr().err
