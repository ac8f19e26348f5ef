"""``hermes-core mcp serve`` over stdio answers a line it cannot read, as JSON-RPC 2.0 requires.

The real command in a subprocess, the real mcp SDK client on its stdin/stdout (through a small
transport here that can also write raw lines between the client's messages, and hands the answers
to those lines to the test). Nothing is faked.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp_support.serving import WAIT, cli_env


class RawStdio:
    """A client transport over ``mcp serve``'s pipes. ``inject`` writes raw bytes between the
    client's messages; answers to them (an error whose id is null or starts with ``raw-``) go to
    :meth:`next_raw` instead of the client."""

    def __init__(self, home: Path, stderr: Path) -> None:
        self.home, self.stderr = home, stderr
        self._lock = anyio.Lock()
        self._raw_send, self._raw_receive = anyio.create_memory_object_stream[dict[str, Any]](100)

    async def __aenter__(self) -> tuple[Any, Any]:
        self._stack = AsyncExitStack()
        log = self._stack.enter_context(self.stderr.open("wb"))
        self.proc = await anyio.open_process(
            [sys.executable, "-m", "hermes_core", "mcp", "serve"], env=cli_env(self.home),
            stderr=log)
        to_client, client_read = create_context_streams[SessionMessage | Exception](0)
        client_write, from_client = create_context_streams[SessionMessage](0)
        tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.callback(tg.cancel_scope.cancel)
        tg.start_soon(self._read_server, to_client)
        tg.start_soon(self._write_server, from_client)
        return client_read, client_write

    async def _read_server(self, to_client: Any) -> None:
        assert self.proc.stdout is not None
        buffer = b""
        async with to_client:
            async for chunk in self.proc.stdout:
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    ident = message.get("id")
                    if "error" in message and (ident is None or str(ident).startswith("raw-")):
                        await self._raw_send.send(message)
                        continue
                    await to_client.send(SessionMessage(
                        types.jsonrpc_message_adapter.validate_python(message, by_name=False)))

    async def _write_server(self, from_client: Any) -> None:
        async with from_client:
            async for item in from_client:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await self.inject(data.encode())

    async def inject(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        async with self._lock:
            await self.proc.stdin.send(data)

    async def next_raw(self) -> dict[str, Any]:
        with anyio.fail_after(WAIT):  # a bound, not a pause: the answer normally comes at once
            return await self._raw_receive.receive()

    def pending_raw(self) -> int:
        return self._raw_receive.statistics().current_buffer_used

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()  # EOF: the server ends its session and exits
        with anyio.fail_after(WAIT):
            await self.proc.wait()
        await self._stack.aclose()


def test_a_line_that_is_not_json_rpc_gets_its_json_rpc_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    wire = RawStdio(home, tmp_path / "stderr.txt")

    async def scenario() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(wire) as client:
            before = await client.call_tool("memory", {
                "action": "add", "target": "user", "content": "Noted before the bad lines"})
            out["before"] = before.is_error
            await wire.inject(b"this is not json {\n")
            out["parse"] = await wire.next_raw()
            await wire.inject(b'{"jsonrpc": "2.0", "id": "raw-7", "method": "tools/call", '
                              b'"params": "not an object"}\n')
            out["invalid"] = await wire.next_raw()
            await wire.inject(b'{"jsonrpc": "1.0", "method": 3}\n')
            out["no_id"] = await wire.next_raw()
            await wire.inject(b"\n")  # a blank line: no message, no answer
            after = await client.call_tool("memory", {
                "action": "add", "target": "user", "content": "Noted after the bad lines"})
            out["after"] = after.is_error
            # the answer to the blank line, had there been one, came before this call's
            out["unanswered"] = wire.pending_raw()
        return out

    out = anyio.run(scenario)
    stderr = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    assert out["before"] is False and out["after"] is False, stderr
    parse = out["parse"]
    assert parse["jsonrpc"] == "2.0" and parse["id"] is None
    assert parse["error"]["code"] == -32700 and "not JSON" in parse["error"]["message"]
    invalid = out["invalid"]
    assert invalid["id"] == "raw-7" and invalid["error"]["code"] == -32600
    assert out["no_id"]["id"] is None and out["no_id"]["error"]["code"] == -32600
    assert out["unanswered"] == 0
    user_md = (home / "memories" / "USER.md").read_text(encoding="utf-8")
    assert "Noted before the bad lines" in user_md and "Noted after the bad lines" in user_md

