"""The webhook under failing stores (issue 33 item 5): archive writes that fail during a turn,
and a read-only home under ``serve``. Real SQLite files, a real server on 127.0.0.1, real
processes; only the model's words come from the loopback Messages API."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from platform_support import EchoModel, archived
from test_readonly_home import _prefix
from test_webhook_idempotency import send
from test_webhook_server import SECRET, Running

from hermes_core.testing import MessagesAPIServer


@pytest.fixture
def api():
    with MessagesAPIServer(EchoModel()) as server:
        yield server


def test_archive_writes_failing_during_a_turn_lose_nothing_and_store_nothing_twice(home, api):
    running = Running(home, api, extra="session_archive:\n  busy_timeout: 0.2\n")
    try:
        assert send(running, {"conversation_key": "w", "text": "first"}, "m1").status_code == 200
        holder = sqlite3.connect(home / "state.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the archive's write lock
        try:
            during = send(running, {"conversation_key": "w", "text": "while locked"}, "m2")
            retried = send(running, {"conversation_key": "w", "text": "while locked"}, "m2")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        # answered, with the failure said, and kept aside (the spool) rather than lost
        assert during.status_code == 200, during.text
        assert retried.status_code == 200 and retried.json() == during.json()
        assert retried.headers["webhook-replayed"] == "true"
        after = send(running, {"conversation_key": "w", "text": "after"}, "m3")
        assert after.status_code == 200, after.text
        users = [r[3] for r in archived(home) if r[1] == "user"]
        assert users == ["first", "while locked", "after"]  # once each, in order
    finally:
        running.stop()


def test_serve_in_a_read_only_home_refuses_to_start_clearly_and_changes_nothing(home):
    prefix = _prefix()
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\n"
        f"webhook:\n  secret: {SECRET}\n  port: 0\n"
        "llm:\n  api_key: test-key\n  base_url: http://127.0.0.1:9\n", encoding="utf-8")
    for path in home.rglob("*"):
        os.chmod(path, 0o555 if path.is_dir() else 0o444)
    os.chmod(home, 0o555)
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    try:
        env = {**os.environ, "HERMES_CORE_HOME": str(home)}
        env.pop("HERMES_CORE_STORAGE_URL", None)
        done = subprocess.run([*prefix, sys.executable, "-m", "hermes_core", "serve", "--port",
                               "0"], env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(home, 0o755)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "webhook.db" in out and "make the home writable" in out, out
    assert "Traceback" not in out
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before


def test_the_answer_kept_for_a_retry_is_json_the_client_can_read(home, api):
    running = Running(home, api)
    try:
        first = send(running, {"conversation_key": "j", "text": "hello"}, "mj")
        con = sqlite3.connect(home / "webhook.db")
        (answer,) = con.execute("SELECT answer FROM webhook_deliveries WHERE id = 'mj'").fetchone()
        con.close()
        assert json.loads(answer) == first.json()
    finally:
        running.stop()
