"""The MCP client side: one asyncio event loop thread per manager, one connection per server.

The ``mcp`` SDK is asyncio; the agent loop is threads. A :class:`ClientManager` owns a daemon
thread running an event loop. Each configured server gets a task that opens the connection
(starting the process for stdio), lists the tools, then holds the connection open until the
manager closes. Calls from the agent's threads are handed to the loop and waited for with a bound;
a call that outlives its deadline is cancelled and reported. A server that fails to start, or dies
later, is marked as such (see :meth:`ClientManager.status`); its calls fail as tool errors and
nothing else is disturbed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from hermes_core.private import private_dir, private_file

from .config import ServerSpec, expand_env

#: JSON-RPC error code the SDK uses when the peer's connection is gone
CONNECTION_CLOSED = -32000

__all__ = ["CallFailed", "ClientManager", "RemoteTool", "ServerState"]

log = logging.getLogger("hermes_core.plugins.mcp")

State = Literal["starting", "running", "failed", "stopped"]


class CallFailed(Exception):
    """A call that did not produce a result: the message names the server and the tool."""


@dataclass(frozen=True, slots=True)
class RemoteTool:
    server: str
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class ServerState:
    name: str
    spec: ServerSpec
    state: State = "starting"
    error: str | None = None
    tools: list[RemoteTool] = field(default_factory=list)
    client: Any = None
    started: float = field(default_factory=time.time)
    ready: threading.Event = field(default_factory=threading.Event)
    stop: asyncio.Event | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "transport": self.spec.transport, "state": self.state,
                "error": self.error, "tools": [t.name for t in self.tools]}


def _sdk_missing() -> str:
    return ("the 'mcp' package is not installed: install the extra with "
            "pip install 'hermes-core-kernel[mcp]'")


class ClientManager:
    """Connections to the configured MCP servers, on one event loop thread."""

    def __init__(self, servers: dict[str, ServerSpec], *, connect_timeout: float = 20.0,
                 call_timeout: float = 30.0, log_dir: Path | None = None) -> None:
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.log_dir = log_dir
        self.servers = {name: ServerState(name, spec) for name, spec in servers.items()}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list[concurrent.futures.Future[None]] = []
        self._logs: list[TextIO] = []
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------------------ lifecycle

    def start(self, *, wait: bool = True) -> None:
        """Connect every server at once (idempotent). With ``wait``, return when all are up or
        failed, or after ``connect_timeout`` (a server still starting then is marked failed)."""
        with self._lock:
            if self._thread is None and not self._closed and self.servers:
                self._launch()
        if wait:
            self.wait_ready(self.connect_timeout, final=True)

    def _launch(self) -> None:
        try:
            import mcp  # noqa: F401
        except ImportError:
            for state in self.servers.values():
                state.state, state.error = "failed", _sdk_missing()
                state.ready.set()
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="mcp-client-loop", daemon=True)
        self._thread.start()
        for state in self.servers.values():
            self._tasks.append(asyncio.run_coroutine_threadsafe(self._hold(state), loop))

    def wait_ready(self, timeout: float, *, final: bool = False) -> list[str]:
        """Wait up to ``timeout`` seconds in all for the servers still starting; return their
        names. With ``final``, those are marked failed (their deadline passed)."""
        deadline = time.monotonic() + timeout
        late = []
        for state in self.servers.values():
            state.ready.wait(max(0.0, deadline - time.monotonic()))
            if not state.ready.is_set():
                late.append(state.name)
                if final:
                    state.state = "failed"
                    state.error = (f"MCP server {state.name!r} did not start and list its tools "
                                   f"within {self.connect_timeout:g} s (mcp.connect_timeout)")
        return late

    def _errlog(self, name: str) -> TextIO:
        import sys

        if self.log_dir is None:
            return sys.stderr
        try:
            # a server's stderr may echo its environment or its callers' data: private, as
            # every file of the home
            path = private_file(private_dir(self.log_dir) / f"mcp-{name}.log")
            handle = path.open("a", encoding="utf-8")
        except OSError:
            return sys.stderr
        self._logs.append(handle)
        return handle

    async def _transport(self, state: ServerState, stack: AsyncExitStack) -> Any:
        spec = state.spec
        where = f"mcp.servers.{state.name}"
        if spec.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            # the SDK merges these over its short list of safe variables (PATH, HOME, ...): the
            # server never sees the rest of this process's environment (API keys and the like)
            env = {k: expand_env(v, where=f"{where}.env.{k}") for k, v in spec.env.items()}
            params = StdioServerParameters(command=spec.command, args=list(spec.args), env=env,
                                           cwd=spec.cwd)
            return stdio_client(params, errlog=self._errlog(state.name))
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {k: expand_env(v, where=f"{where}.headers.{k}") for k, v in spec.headers.items()}
        bound = (spec.call_timeout or self.call_timeout) + 5
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(bound)))
        return streamable_http_client(spec.url or "", http_client=client)

    async def _hold(self, state: ServerState) -> None:
        from mcp import Client

        state.stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(state, stack)
                client = await stack.enter_async_context(Client(transport))
                listed = await client.list_tools()
                state.tools = [RemoteTool(state.name, t.name, t.description or "",
                                          dict(t.input_schema or {"type": "object"}))
                               for t in listed.tools]
                state.client = client
                state.state = "running"
                state.ready.set()
                await state.stop.wait()
        except BaseException as exc:  # the connection task must record every way it ends
            if state.state not in ("stopped", "failed"):
                starting = not state.ready.is_set()
                state.error = _describe(state.name, exc, starting=starting)
                state.state = "failed"
                # a start failure is reported by whoever waits for the start (get_tools, the
                # servers command); a death later has no one else to tell
                log.log(logging.DEBUG if starting else logging.ERROR, "%s", state.error)
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            state.client = None
            if state.state == "running":
                state.state = "failed"
                state.error = f"MCP server {state.name!r} closed the connection"
            state.ready.set()

    def close(self, timeout: float = 5.0) -> None:
        """Close every connection (stopping stdio servers), then the loop; bounded."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        for state in self.servers.values():
            if state.state in ("running", "starting"):
                state.state = "stopped"
            if state.stop is not None:
                loop.call_soon_threadsafe(state.stop.set)
        concurrent.futures.wait(self._tasks, timeout=timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        for handle in self._logs:
            handle.close()

    def _lost(self, state: ServerState, error: str) -> None:
        """Mark a server whose connection broke as failed, and let its task clean up."""
        state.state, state.error = "failed", error
        log.error("%s", error)
        if state.stop is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(state.stop.set)

    # ---------------------------------------------------------------------------------- calls

    def status(self) -> list[dict[str, Any]]:
        return [s.as_dict() for s in self.servers.values()]

    def problems(self) -> list[str]:
        return [s.error for s in self.servers.values() if s.state == "failed" and s.error]

    def call(self, server: str, tool: str, arguments: dict[str, Any], *,
             timeout: float | None = None) -> tuple[str, bool]:
        """Call ``tool`` on ``server``: (text, is_error). Raises :class:`CallFailed` when the
        server is not running, dies during the call, or does not answer within the deadline."""
        state = self.servers.get(server)
        if state is None:
            raise CallFailed(f"no MCP server named {server!r} is configured (mcp.servers)")
        client, loop = state.client, self._loop
        if state.state != "running" or client is None or loop is None:
            raise CallFailed(f"MCP server {server!r} is not running, so tool {tool!r} cannot be "
                             f"called: {state.error or state.state}")
        bound = timeout if timeout is not None else (state.spec.call_timeout or self.call_timeout)
        future = asyncio.run_coroutine_threadsafe(client.call_tool(tool, arguments), loop)
        try:
            result = future.result(bound)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise CallFailed(f"MCP server {server!r} did not answer tool {tool!r} within {bound:g} s "
                             "(mcp.call_timeout); the call was abandoned") from None
        except Exception as exc:
            if state.state == "running" and _connection_lost(exc):
                self._lost(state, f"MCP server {server!r} stopped: the connection closed during "
                                  f"tool {tool!r} (did the process exit? see its log)")
            gone = state.state != "running"
            why = state.error if gone and state.error else f"{type(exc).__name__}: {exc}"
            raise CallFailed(f"MCP server {server!r} failed during tool {tool!r}: {why}") from None
        return _result_text(result), bool(getattr(result, "is_error", False))


def _connection_lost(exc: BaseException) -> bool:
    code = getattr(getattr(exc, "error", None), "code", None)
    if code is None:
        code = getattr(exc, "code", None)
    return code == CONNECTION_CLOSED or isinstance(exc, ConnectionError | EOFError)


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        else:
            parts.append(f"[{kind} content omitted]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _describe(name: str, exc: BaseException, *, starting: bool) -> str:
    inner: BaseException = exc
    while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
        inner = inner.exceptions[0]
    what = "failed to start" if starting else "stopped"
    text = str(inner) or type(inner).__name__
    return f"MCP server {name!r} {what}: {type(inner).__name__}: {text}"
