"""Running ``hermes-core mcp serve`` in a subprocess for the tests (stdio or HTTP on 127.0.0.1)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

#: bound on every wait for a subprocess (the machine may be busy: generous, never a sleep)
WAIT = 120.0
#: the bearer token :func:`http_server` gives the server (through HERMES_CORE_MCP_TOKEN)
TOKEN = "test-token-for-mcp-0123456789"


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HERMES_CORE_", "ANTHROPIC_"))}
    env["HERMES_CORE_HOME"] = str(home)
    env.update(extra)
    return env


def cli(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_core", *args], env=cli_env(home, **extra),
                          capture_output=True, text=True, timeout=WAIT)


@asynccontextmanager
async def connect(url: str, token: str | None = TOKEN, *, uds: str | None = None,
                  **options: Any) -> AsyncIterator[Any]:
    """The SDK client on ``url`` sending ``token`` as its bearer token (over ``uds`` if given)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    transport = httpx2.AsyncHTTPTransport(uds=uds) if uds is not None else None
    async with httpx2.AsyncClient(headers=headers, transport=transport, timeout=WAIT) as http, \
            Client(streamable_http_client(url, http_client=http), **options) as client:
        yield client


@contextmanager
def http_server(home: Path, *args: str, token: str | None = TOKEN, snippet: list[str] | None = None,
                log: list[str] | None = None, fd_limit: int | None = None,
                **extra: str) -> Iterator[str]:
    """Start ``mcp serve --transport http --port 0``; yield its URL once it listens.

    ``token`` goes into HERMES_CORE_MCP_TOKEN (None: the server uses its home's token file);
    ``snippet`` gets the lines printed after the announcement with a new token (to the end of
    the client configuration); ``log`` everything it printed on stderr (complete once the block
    exits); ``fd_limit`` lowers the server's open-file limit."""
    if token is not None:
        extra.setdefault("HERMES_CORE_MCP_TOKEN", token)
    command = [sys.executable, "-m", "hermes_core", "mcp", "serve", "--transport", "http", *args]
    if "--uds" not in args:
        command += ["--port", "0"]
    def limit() -> None:
        import resource

        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    proc = subprocess.Popen(command, env=cli_env(home, **extra), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
            if log is not None:
                log.append(line)
        lines.put(None)

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    seen: list[str] = []
    try:
        while True:
            line = lines.get(timeout=WAIT)
            if line is None:
                raise AssertionError("mcp serve exited before listening:\n" + "".join(seen))
            seen.append(line)
            if "serving on " in line:
                if snippet is not None:  # the client configuration shown with a new token
                    while True:
                        more = lines.get(timeout=WAIT)
                        if more is None:
                            raise AssertionError("no client configuration:\n" + "".join(seen))
                        snippet.append(more)
                        if more == "}\n":
                            break
                yield line.split("serving on ", 1)[1].strip()
                break
    finally:
        proc.terminate()
        try:
            proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(WAIT)
        pumping.join(WAIT)
