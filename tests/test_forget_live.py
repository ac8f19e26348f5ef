"""Forget reaches running servers (issue 33 item 2): ``forget X`` beside a running ``serve``,
then a message on a live conversation: X is absent from the model request (read at the loopback
Messages API, the only fake: the model's words) and from every file and table afterwards.

SQLite here (one node, in-process server, ``forget`` in its own process); two real ``serve``
processes on one PostgreSQL database below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from platform_support import EchoModel, host_for
from serve_nodes import ServeNode, node_config

from hermes_core.dispatch import connect_platform, disconnect_platform
from hermes_core.plugins.platforms.webhook import signed_headers
from hermes_core.storage.erasures import ErasureLedger, record_erasure
from hermes_core.testing import MessagesAPIServer

SECRET = "s3cret-for-forget-0123456789abcdef"
TOKEN = "ZEBRA42QUILL"


class Recording:
    """EchoModel that keeps every request body as JSON text."""

    def __init__(self) -> None:
        self.echo = EchoModel()
        self.bodies: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        with self.lock:
            self.bodies.append(json.dumps(body))
        return self.echo(body)


def forget_in(home: Path, subject: str, storage_url: str | None = None) -> subprocess.CompletedProcess[str]:
    """``hermes-core forget`` in its own process (answers yes should it ask)."""
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    env.pop("HERMES_CORE_STORAGE_URL", None)
    if storage_url:
        env["HERMES_CORE_STORAGE_URL"] = storage_url
    done = subprocess.run([sys.executable, "-m", "hermes_core", "forget", subject, "--yes"], env=env,
                          input="y\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def files_mentioning(root: Path, word: str) -> list[str]:
    needle = word.lower().encode()
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes().lower():
            found.append(str(path.relative_to(root)))
    return found


def post(client: httpx.Client, payload: dict[str, Any], secret: str = SECRET) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", **signed_headers(secret, body)}
    return client.post("/messages", content=body, headers=headers)


def test_forget_beside_a_running_serve_reaches_its_live_conversation(home: Path) -> None:
    memories = home / "memories"
    memories.mkdir(parents=True, exist_ok=True)
    (memories / "MEMORY.md").write_text(f"The vault word is {TOKEN}.\n§\nUser likes tea.\n",
                                        encoding="utf-8")
    model = Recording()
    with MessagesAPIServer(model) as api:
        host = host_for(home, api, f"webhook:\n  secret: {SECRET}\n  port: 0\n",
                        providers="file_memory, session_archive")
        platform, dispatcher = connect_platform(host, "webhook")
        client = httpx.Client(base_url=platform.url, timeout=60)
        try:
            first = post(client, {"conversation_key": "live", "text": f"remember {TOKEN} please"})
            assert first.status_code == 200, first.text
            assert TOKEN in model.bodies[-1]  # in the history and the frozen snapshot
            assert dispatcher.agent_of("webhook", "live") is not None  # the conversation is live
            forget_in(home, TOKEN)
            second = post(client, {"conversation_key": "live", "text": "what do you know?"})
            assert second.status_code == 200, second.text
            request = model.bodies[-1]
            assert TOKEN.lower() not in request.lower(), request
            assert "User likes tea." in request  # the snapshot was frozen afresh, not dropped
        finally:
            client.close()
            disconnect_platform(host, platform, dispatcher)
            host.shutdown()
    assert files_mentioning(home, TOKEN) == []


def test_an_erasure_recorded_while_a_server_was_away_is_seen_by_it(home: Path) -> None:
    """The generation is stored: a reader that starts (or comes back) later reads it there."""
    ledger = ErasureLedger(home)
    assert ledger.current() == 0 and not (home / "erasures.db").exists()  # reading creates nothing
    assert record_erasure("forget", home=home, config_url=False) == 1
    assert record_erasure("sessions delete", home=home, config_url=False) == 2
    assert ErasureLedger(home).current() == 2
    assert (home / "erasures.db").stat().st_mode & 0o777 == 0o600


def test_the_erasure_generation_in_postgresql_is_shared(tmp_path: Path, pg_url: str) -> None:
    from hermes_core.storage import parse_storage_url

    url = parse_storage_url(pg_url)
    one, two = ErasureLedger(tmp_path / "a", url), ErasureLedger(tmp_path / "b", url)
    assert one.current() == two.current() == 0
    assert record_erasure("forget", home=tmp_path / "a", storage_url=pg_url) == 1
    # a reader that just read learns of it by notification (delivered a moment after the commit)
    deadline = time.monotonic() + 30
    while two.current() != 1:
        assert time.monotonic() < deadline, "the notification never arrived"
    assert ErasureLedger(tmp_path / "c", url).current() == 1  # a new reader reads the row
    assert not (tmp_path / "b" / "erasures.db").exists()


def cli_in(home: Path, storage_url: str, *args: str) -> None:
    env = {**os.environ, "HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": storage_url}
    done = subprocess.run([sys.executable, "-m", "hermes_core", *args], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_nodes_on_postgresql_forget_then_a_message(tmp_path: Path, pg_url: str) -> None:
    model = Recording()
    with MessagesAPIServer(model) as api:
        config = node_config(api.base_url).replace("providers: [session_archive]",
                                                   "providers: [file_memory, session_archive]")
        (tmp_path / "node-0").mkdir()
        (tmp_path / "node-0" / "config.yaml").write_text(config, encoding="utf-8")
        cli_in(tmp_path / "node-0", pg_url, "memory", "add", f"The vault word is {TOKEN}.")
        cli_in(tmp_path / "node-0", pg_url, "memory", "add", "User likes tea.")
        nodes = [ServeNode(tmp_path / f"node-{i}", pg_url, api.base_url, config=config)
                 for i in range(2)]
        try:
            for i, node in enumerate(nodes):
                sent = node.post({"conversation_key": f"c{i}", "text": f"note {TOKEN} {i}"})
                assert sent.status_code == 200, sent.text
            assert all(TOKEN in b for b in model.bodies)
            forget_in(tmp_path / "node-0", TOKEN, pg_url)
            seen = len(model.bodies)
            for i, node in enumerate(nodes):
                sent = node.post({"conversation_key": f"c{i}", "text": "and now?"})
                assert sent.status_code == 200, sent.text
            later = model.bodies[seen:]
            assert len(later) == 2 and all(TOKEN.lower() not in b.lower() for b in later)
            assert all("User likes tea." in b for b in later)  # frozen afresh, not dropped
        finally:
            for node in nodes:
                node.stop()
    from hermes_core.storage import close_pools, parse_storage_url
    from hermes_core.storage.pool import get_pool

    pool: Any = get_pool(parse_storage_url(pg_url))
    with pool.connection() as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")]
        hits = []
        for table in tables:
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            if any(TOKEN.lower() in str(row).lower() for row in rows):
                hits.append(table)
    close_pools()
    assert hits == []
    for i in range(2):
        assert files_mentioning(tmp_path / f"node-{i}", TOKEN) == []


def test_a_postgresql_reader_learns_by_notification_and_after_its_connection_was_cut(
        tmp_path: Path, pg_url: str) -> None:
    """The reader's check is a poll of a LISTENing connection; a raise is seen through the
    notification, and one made while its connection was cut (a node away) on reconnection."""
    from hermes_core.storage import parse_storage_url
    from hermes_core.storage.pool import get_pool

    url = parse_storage_url(pg_url)
    reader = ErasureLedger(tmp_path / "a", url)
    assert reader.current() == 0
    assert record_erasure("forget", home=tmp_path / "b", storage_url=pg_url) == 1
    deadline = time.monotonic() + 30
    while reader.current() != 1:  # the notification, not the periodic re-read
        assert time.monotonic() < deadline, "the notification never arrived"
    pid = reader._reader.info.backend_pid
    with get_pool(url).connection() as con:  # an administrator (or a failover) cuts it
        # with a timeout the server returns once the backend has exited (without one it only
        # signals it, and a poll made before it exits finds the connection still open)
        ended = con.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone()
        assert ended is not None and ended[0] is True, "the reader's backend outlived 10 s"
    assert record_erasure("sessions delete", home=tmp_path / "b", storage_url=pg_url) == 2
    assert reader.current() == 2
    reader.close()
