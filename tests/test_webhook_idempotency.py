"""Idempotent webhook delivery (issue 33 item 3): the ``webhook-id`` is the idempotency key.

Real server on 127.0.0.1, real SQLite files; only the model's words come from the loopback
Messages API (EchoModel). The many-node and kill -9 cases are in test_webhook_retry_nodes.py.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import pytest
from platform_support import EchoModel, archived
from test_webhook_server import SECRET, Running

from hermes_core.plugins.platforms.webhook import signed_headers
from hermes_core.plugins.platforms.webhook.deliveries import SQLITE_FILE
from hermes_core.testing import MessagesAPIServer


@pytest.fixture
def model():
    return EchoModel()


@pytest.fixture
def api(model):
    with MessagesAPIServer(model) as server:
        yield server


@pytest.fixture
def hook(home, api):
    running = Running(home, api)
    yield running
    running.stop()


_LAST = [0]


def _fresh_timestamp() -> int:
    """A timestamp never used before by this module (now, or a second past the last one)."""
    _LAST[0] = max(int(time.time()), _LAST[0] + 1)
    return _LAST[0]


def send(hook: Running, payload: dict, msg_id: str, path: str = "/messages"):
    """Signed anew each time, as a client retries (another timestamp, so another signature: the
    replay guard refuses the very same signed bytes twice), with ``msg_id``."""
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json",
               **signed_headers(SECRET, body, msg_id=msg_id,
                                timestamp=_fresh_timestamp())}
    return hook.client.post(path, content=body, headers=headers)


def test_a_retry_gets_the_first_answer_and_stores_nothing_twice(hook, home, model):
    payload = {"conversation_key": "k1", "text": "hello there"}
    first = send(hook, payload, "msg_one")
    assert first.status_code == 200, first.text
    calls = model.calls
    again = send(hook, payload, "msg_one")
    assert again.status_code == 200 and again.json() == first.json()
    assert again.headers["webhook-replayed"] == "true"
    assert model.calls == calls  # no second turn
    assert [r[1] for r in archived(home)] == ["user", "assistant"]
    # the id is stored with the archived message too
    con = sqlite3.connect(home / "state.db")
    metas = [json.loads(m) for (m,) in con.execute(
        "SELECT meta FROM messages WHERE role = 'user'") if m]
    con.close()
    assert [m.get("message_id") for m in metas] == ["msg_one"]
    # a new id is a new message
    other = send(hook, payload, "msg_two")
    assert other.status_code == 200 and "webhook-replayed" not in other.headers
    assert [r[1] for r in archived(home)] == ["user", "assistant"] * 2


def test_the_same_id_with_another_body_is_409_naming_the_id(hook, home):
    assert send(hook, {"conversation_key": "k2", "text": "first"}, "msg_x").status_code == 200
    clash = send(hook, {"conversation_key": "k2", "text": "changed"}, "msg_x")
    assert clash.status_code == 409
    assert "msg_x" in clash.json()["error"] and clash.json()["webhook_id"] == "msg_x"
    assert [r[3] for r in archived(home) if r[1] == "user"] == ["first"]


def test_a_stream_retry_replays_the_answer(hook, home, model):
    payload = {"conversation_key": "k3", "text": "stream me"}
    first = send(hook, payload, "msg_s", path="/messages/stream")
    assert first.status_code == 200 and "event: done" in first.text
    calls = model.calls
    again = send(hook, payload, "msg_s", path="/messages/stream")
    assert again.status_code == 200 and again.headers["webhook-replayed"] == "true"
    assert "re: stream me" in again.text and model.calls == calls


def test_a_retry_while_the_first_runs_is_in_progress_then_answered(home):
    gate = threading.Event()
    slow = EchoModel()

    def held(body):
        gate.wait(30)
        return slow(body)

    with MessagesAPIServer(held) as server:
        running = Running(home, server)
        try:
            payload = {"conversation_key": "k4", "text": "slow one"}
            out: list = []
            worker = threading.Thread(target=lambda: out.append(send(running, payload, "msg_w")))
            worker.start()
            deadline = threading.Event()
            for _ in range(300):  # until the first copy is in line
                if running.dispatcher.pending("webhook", "k4"):
                    break
                deadline.wait(0.05)
            busy = send(running, payload, "msg_w")
            assert busy.status_code == 202 and busy.json()["status"] == "in_progress"
            gate.set()
            worker.join(30)
            assert out and out[0].status_code == 200
            again = send(running, payload, "msg_w")
            assert again.json() == out[0].json()
            assert [r[1] for r in archived(home)] == ["user", "assistant"]
        finally:
            gate.set()
            running.stop()


def test_a_failed_turn_is_not_kept_and_its_retry_reuses_the_stored_message(home):
    state = {"fail": True}
    echo = EchoModel()

    def flaky(body):
        if state["fail"]:
            from hermes_core.testing import Failure
            return Failure(500, "api_error", "overloaded")
        return echo(body)

    with MessagesAPIServer(flaky) as server:
        running = Running(home, server)
        try:
            payload = {"conversation_key": "k5", "text": "please answer"}
            failed = send(running, payload, "msg_f")
            assert failed.status_code == 502, failed.text
            assert [r[1] for r in archived(home)] == ["user"]
            state["fail"] = False
            ok = send(running, payload, "msg_f")
            assert ok.status_code == 200 and "webhook-replayed" not in ok.headers
            # the model saw the message once, and it is stored once
            assert ok.json()["reply"] == "re: please answer (1)"
            assert [r[1] for r in archived(home)] == ["user", "assistant"]
        finally:
            running.stop()


def test_the_delivery_records_are_a_private_sqlite_file(hook, home):
    assert send(hook, {"conversation_key": "k6", "text": "hi"}, "msg_p").status_code == 200
    path = home / SQLITE_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    con = sqlite3.connect(path)
    rows = con.execute("SELECT id, state, status FROM webhook_deliveries").fetchall()
    con.close()
    assert rows == [("msg_p", "done", 200)]
