"""The PostgreSQL server going away under a running webhook node, and coming back.

Real parts: a throwaway PostgreSQL server of this test's own (halted and resumed on the same data
folder), the webhook server on 127.0.0.1, httpx, the anthropic SDK against the loopback Messages
API, the session archive and the file memory in that database. Faked: only the model's words.

While the server is down, a message gets a clear, quick 503 naming the database (password
hidden), nothing is written to the home's SQLite files, and the node stays up; when the server
is back the node serves again (within the hooks' own deadlines) and every accepted message is in
the archive once.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hermes_core.dispatch import connect_platform, disconnect_platform
from hermes_core.plugins.platforms.webhook import signed_headers
from hermes_core.testing import MessagesAPIServer, Reply, make_host

SECRET = "s3cret-for-the-outage-0123456789"
#: bounds on waiting for real answers (never asserted as speeds): the old code waited 600 s for
#: a pool that could not connect, so a request during the outage outlived this bound
ANSWER_BOUND = 90.0


def _echo(body: dict[str, Any]) -> Reply:
    content = body["messages"][-1]["content"]
    text = content if isinstance(content, str) else " ".join(
        b.get("text", "") for b in content if b.get("type") == "text")
    return Reply(text="re: " + text.split("<memory-context>")[0].strip()[-40:])


def test_database_going_away_gets_a_clear_503_and_the_node_serves_again(
    own_pg_server: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hermes_core.storage import close_pools
    from hermes_core.storage.component import forget_migrations
    from hermes_core.storage.locks import close_lock_pools

    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", own_pg_server.url)
    with MessagesAPIServer(_echo) as api:
        config = (
            "memory:\n  providers: [file_memory, session_archive]\n  scope: user\n"
            "context:\n  engine: compressor\n"
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n  timeout: 20\n"
            f"webhook:\n  secret: {SECRET}\n  port: 0\n")
        host = make_host(home, config=config)
        platform, dispatcher = connect_platform(host, "webhook")
        client = httpx.Client(base_url=platform.url, timeout=ANSWER_BOUND)

        def post(text: str, key: str = "c1") -> httpx.Response:
            body = json.dumps({"conversation_key": key, "text": text, "user": "alice"}).encode()
            headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
            return client.post("/messages", content=body, headers=headers)

        try:
            assert post("first message").status_code == 200
            own_pg_server.halt()
            answers: dict[str, httpx.Response | BaseException] = {}

            def send(name: str, text: str, key: str) -> None:
                try:
                    answers[name] = post(text, key)
                except BaseException as exc:  # a timeout is the failure this test looks for
                    answers[name] = exc

            senders = [threading.Thread(target=send, args=("same", "while down", "c1")),
                       threading.Thread(target=send, args=("other", "new while down", "c2"))]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join(ANSWER_BOUND + 5)
            for name in ("same", "other"):
                down = answers[name]
                assert isinstance(down, httpx.Response), f"{name}: no answer: {down!r}"
                assert down.status_code == 503, down.text
                assert down.json()["transient"] is True
                error = down.json()["error"]
                assert "hermes:***@127.0.0.1" in error and own_pg_server.password not in error
            for attempt in range(3):  # a longer outage: the pool's own reconnection backs off
                again = post(f"retry {attempt} while down")
                assert again.status_code == 503, again.text
            assert client.get("/health").status_code == 200  # the node stays up
            own_pg_server.resume()
            back = post("after the restart")
            assert back.status_code == 200, back.text
            assert post("and a new one", key="c3").status_code == 200

            import psycopg

            with psycopg.connect(own_pg_server.url) as con:
                users = [r[0] for r in con.execute(
                    "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]
            assert users == ["first message", "after the restart", "and a new one"]
            assert not (home / "state.db").exists() and not (home / "memories").exists()
        finally:
            client.close()
            disconnect_platform(host, platform, dispatcher)
            host.shutdown()
            close_pools()
            close_lock_pools()
            forget_migrations()


def test_a_pool_fails_fast_while_the_server_is_down_and_serves_as_soon_as_it_is_back(
    own_pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store pool after the server went away: a read raises the connection's own error
    ("Connection refused") instead of waiting the pool's 60 s timeout twice (the read is
    retried once after the pool is checked). psycopg's pool then retries its lost connections
    with exponential back-off (1, 2, 4, ... s): a server back in between was not used until
    the pool's next attempt (a serve node's first answer came 9-13 s after a restart that
    followed a 20 s outage). A checkout that got nothing from the pool within PROBE_AFTER
    connects directly; when the server answers, that connection serves it."""
    import psycopg
    from psycopg_pool.base import AttemptWithBackoff

    from hermes_core.storage import close_pools, get_pool
    from hermes_core.storage.component import run_on
    from hermes_core.storage.pool import PROBE_AFTER

    # the back-off as after a long outage, without the wait: the pool's first failed
    # reconnection puts its next attempt a minute away (the real code path, a longer delay)
    monkeypatch.setattr(AttemptWithBackoff, "INITIAL_DELAY", 60.0)
    pool = get_pool(own_pg_server.url)

    def read(con: Any) -> int:
        return int(con.execute("SELECT 1").fetchone()[0])

    try:
        assert run_on(pool, read, retry=True) == 1
        own_pg_server.halt()
        with pytest.raises(psycopg.OperationalError, match="Connection refused"):
            run_on(pool, read, retry=True)
        deadline = time.monotonic() + 60.0
        while pool.get_stats().get("connections_errors", 0) < 1:  # the pool tried and failed
            assert time.monotonic() < deadline, pool.get_stats()
            time.sleep(0.05)
        own_pg_server.resume()
        # the pool's own next attempt is a minute away; the checkout is served well before
        with pool.connection(timeout=PROBE_AFTER + 20) as con:
            assert read(con) == 1
        assert run_on(pool, read, retry=True) == 1
    finally:
        close_pools()


def test_a_busy_pool_lends_at_most_max_size_direct_connections(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pooled connection held: a checkout that waited PROBE_AFTER gets a direct
    connection (closed when returned, not kept by the pool), at most max_size of them; past
    that, the checkout waits for the pool as before."""
    from psycopg_pool import PoolTimeout

    from hermes_core.storage import pool as pool_module

    monkeypatch.setattr(pool_module, "PROBE_AFTER", 0.2)
    pool = pool_module.pool_class()(pg_url, min_size=2, max_size=2, open=True, timeout=30.0,
                                    kwargs={"autocommit": True})
    try:
        pool.wait(timeout=60.0)  # both pooled connections made (a pool growing is not busy)
        held = [pool.getconn() for _ in range(2)]
        lent = [pool.getconn() for _ in range(2)]
        assert all(int(con.execute("SELECT 1").fetchone()[0]) == 1 for con in lent)
        with pytest.raises(PoolTimeout):
            pool.getconn(timeout=1.0)
        for con in lent:
            pool.putconn(con)
            assert con.closed
        again = pool.getconn(timeout=5.0)  # a lent connection returned makes room for another
        pool.putconn(again)
        for con in held:
            pool.putconn(con)
        assert not any(con.closed for con in held)
        assert pool.get_stats()["pool_size"] == 2
    finally:
        pool.close()
