"""Real ``hermes-core serve`` processes for the many-node tests: one home each, one storage.url.

Each node is a subprocess started with its own ``HERMES_CORE_HOME`` and the shared
``HERMES_CORE_STORAGE_URL``; its URL is read from the line it prints when it listens (bounded
wait), and it is stopped by PID (SIGTERM, then SIGKILL after a bound).
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from hermes_core.plugins.platforms.webhook import signed_headers

SECRET = "s3cret-for-nodes-0123456789abcdef"
START_TIMEOUT = 60.0


def node_config(api_url: str, extra: str = "") -> str:
    return (
        "memory:\n  providers: [session_archive]\ncontext:\n  engine: compressor\n"
        f"llm:\n  base_url: {api_url}\n  api_key: test-key\n  model: claude-test\n"
        "  max_retries: 0\n  timeout: 60\n"
        # what these tests check is what is stored, in which order, on which node; a loaded
        # PostgreSQL took the archive's on_message past its 2 s deadline (the message was then
        # refused, and the test failed on the refusal, not on what it checks)
        "hooks:\n  timeouts:\n    on_message: 60\n    load_session: 60\n"
        f"webhook:\n  secret: {SECRET}\n  port: 0\n{extra}")


def signed(payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one signed request."""
    body = json.dumps(payload).encode()
    return body, {"Content-Type": "application/json", **signed_headers(SECRET, body)}


class ServeNode:
    def __init__(self, home: Path, storage_url: str, api_url: str, *,
                 config: str | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.yaml").write_text(config or node_config(api_url), encoding="utf-8")
        env = {**os.environ, "HERMES_CORE_HOME": str(home),
               "HERMES_CORE_STORAGE_URL": storage_url, "PYTHONUNBUFFERED": "1"}
        env.pop("ANTHROPIC_API_KEY", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hermes_core", "serve", "--port", "0"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []

        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                lines.put(line)
            lines.put("")

        threading.Thread(target=pump, daemon=True).start()
        self.url = ""
        while not self.url:
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                self.kill()
                raise AssertionError(f"serve did not start: {''.join(self.output)}") from None
            if line == "":
                raise AssertionError(f"serve exited: {''.join(self.output)}")
            if "listening on " in line:
                self.url = line.split("listening on ", 1)[1].split()[0]
        self.client = httpx.Client(base_url=self.url, timeout=120)

    def post(self, payload: dict[str, Any]) -> httpx.Response:
        """POST one signed message. When the connection breaks before an answer (a kept-alive
        connection the node closed while idle past its header timeout, as it does on a loaded
        machine), the message is sent again with the same webhook-id, as docs/platforms.md tells
        clients to: the id makes the retry safe, and the tests check that nothing is stored twice."""
        body = json.dumps(payload).encode()
        msg_id = "msg_" + secrets.token_hex(12)
        stamp = int(time.time())
        for attempt in range(3):
            headers = {"Content-Type": "application/json",
                       **signed_headers(SECRET, body, msg_id=msg_id, timestamp=stamp + attempt)}
            try:
                return self.send(body, headers)
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                if attempt == 2:
                    raise
        raise AssertionError("not reached")

    def send(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        """POST exactly these bytes and headers (a captured request, replayed)."""
        return self.client.post("/messages", content=body, headers=headers)

    def kill(self) -> None:
        """kill -9: no shutdown of any kind."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
