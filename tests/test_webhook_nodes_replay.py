"""A signed request is served once by the whole service, not once per node: two real ``serve``
nodes sharing one PostgreSQL storage.url refuse a request the other node already served, and a
node restarted within the skew window refuses what it served before the restart.

Real parts: ``hermes-core serve`` processes, signed HTTP on 127.0.0.1, PostgreSQL, the anthropic
SDK against the loopback Messages API. Faked: only the model's words (EchoModel).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from platform_support import EchoModel
from serve_nodes import ServeNode, signed
from test_many_nodes import stored

from hermes_core.testing import MessagesAPIServer


def test_a_request_served_by_one_node_is_a_replay_on_the_other_and_after_a_restart(
    tmp_path: Path, pg_url: str
) -> None:
    with MessagesAPIServer(EchoModel()) as api:
        first = ServeNode(tmp_path / "node-a", pg_url, api.base_url)
        second = ServeNode(tmp_path / "node-b", pg_url, api.base_url)
        try:
            body, headers = signed({"conversation_key": "pay", "text": "transfer 100 once"})
            served = first.send(body, headers)
            assert served.status_code == 200, served.text
            replayed = second.send(body, headers)
            assert replayed.status_code == 401, replayed.text
            assert "already received" in replayed.json()["error"]
            first.stop()
            first = ServeNode(tmp_path / "node-a", pg_url, api.base_url)  # restarted
            again = first.send(body, headers)
            assert again.status_code == 401, again.text
            fresh = second.post({"conversation_key": "pay", "text": "and a new request"})
            assert fresh.status_code == 200, fresh.text  # signed anew: served
        finally:
            first.stop()
            second.stop()
        assert len(api.bodies) == 2
    assert [c for role, c in stored(pg_url)["pay"] if role == "user"] == [
        "transfer 100 once", "and a new request"]


def test_the_shared_guard_answers_for_every_guard_of_the_database(pg_url: str) -> None:
    from hermes_core.plugins.platforms.webhook.replays import SharedReplayGuard
    from hermes_core.plugins.platforms.webhook.signing import SignatureError
    from hermes_core.storage import parse_storage_url

    url = parse_storage_url(pg_url)
    a, b = SharedReplayGuard(url, 300), SharedReplayGuard(url, 300)
    a.check(b"mac-1", now=1000.0)
    with pytest.raises(SignatureError, match="another node"):
        b.check(b"mac-1", now=1001.0)
    b.check(b"mac-2", now=1001.0)
    with pytest.raises(SignatureError):
        a.check(b"mac-2", now=1002.0)
    # rows older than twice the window leave at the next prune; within it they stay
    b.check(b"mac-3", now=1000.0 + 2 * 300 + 5)
    a.check(b"mac-1", now=1000.0 + 2 * 300 + 10)  # pruned: the timestamp check guards it now


def test_an_unreachable_guard_database_refuses_with_503_and_forgets_the_request() -> None:
    from hermes_core.plugins.platforms.webhook.replays import (
        ReplayStoreUnavailable,
        SharedReplayGuard,
    )
    from hermes_core.storage import parse_storage_url

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    guard = SharedReplayGuard(parse_storage_url(
        f"postgresql://hermes:pw-never-shown@127.0.0.1:{port}/hermes?connect_timeout=2"), 300)
    for _attempt in range(2):  # refused both times: never recorded as served
        with pytest.raises(ReplayStoreUnavailable) as caught:
            guard.check(b"mac-1", now=1000.0)
        assert "retry it later" in str(caught.value)
        assert "pw-never-shown" not in str(caught.value)
