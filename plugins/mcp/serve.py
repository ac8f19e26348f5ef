"""``hermes-core mcp serve``: the MCP handlers over stdio or streamable HTTP.

The handlers are thin: each runs the synchronous :class:`~.server.StackServer` call in a worker
thread. stdio needs no credential (the client owns the process). HTTP, on loopback too, passes
every request through :func:`gate` before the SDK sees it:

1. ``GET /health`` answers ``{"status": "ok"}`` (nothing else, no credential needed);
2. the bearer token (:mod:`.credential`): missing, wrong or revoked gets 401, whatever the method;
3. an ``Origin`` header not listed in ``mcp.allowed_origins`` gets 403 (a web page cannot drive
   the server);

a listed origin's CORS preflight (``OPTIONS``, which a browser sends without the token) is
answered before the gate, and every answer to that origin says a browser may read it (Starlette's
``CORSMiddleware``), so a page on a listed origin can call the server with its token;

and the connections are bounded as the webhook's are (:mod:`hermes_core.httpguard`: a header
deadline, a cap on connections still sending headers), client sessions by ``mcp.max_sessions``,
and a session idle for ``mcp.session_idle_minutes`` is closed with its archived session.
``--uds PATH`` serves on a Unix domain socket (mode 0600) instead of a TCP port.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import json
import logging
import os
import socket
import stat
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core.netaddr import is_loopback

from .server import ServedCall, StackServer, connection_key

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from .config import McpConfig
    from .credential import Credential

__all__ = ["ServeError", "build_server", "gate", "is_loopback", "run_http", "run_stdio"]

#: the Host header values a loopback (or Unix socket) server accepts (DNS rebinding protection)
_LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]

#: what a page on a listed origin may send (streamable HTTP: POST calls, GET stream, DELETE end)
_CORS_METHODS = ["GET", "POST", "DELETE"]
_CORS_HEADERS = ["authorization", "content-type", "mcp-protocol-version", "mcp-session-id",
                 "last-event-id"]

log = logging.getLogger("hermes_core.plugins.mcp")


class ServeError(Exception):
    """The server cannot start as asked; the message says how to fix it."""




def build_server(stack: StackServer) -> Server[Any]:
    import anyio
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(fn, *args)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        listed = await in_thread(stack.list_tools)
        return types.ListToolsResult(tools=[types.Tool(**t) for t in listed])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta = ctx.meta.model_dump(by_alias=True) if hasattr(ctx.meta, "model_dump") else ctx.meta
        key = connection_key(stack.transport, ctx.request, meta)
        info = (meta or {}).get("io.modelcontextprotocol/clientInfo") if isinstance(meta, dict) else None
        name = info.get("name") if isinstance(info, dict) else _legacy_client_name(ctx)
        deadline = stack.deadline(params.name)
        answer: ServedCall | None = None
        with anyio.move_on_after(deadline):
            try:  # a call past its deadline is abandoned on its worker thread (it may finish)
                answer = await anyio.to_thread.run_sync(stack.serve, key, name, params.name,
                                                        params.arguments, abandon_on_cancel=True)
            except LookupError as exc:
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        if answer is None:
            answer = stack.late(params.name, deadline)
        return types.CallToolResult(content=[types.TextContent(type="text", text=answer.text)],
                                    is_error=answer.is_error)

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        listed = await in_thread(stack.list_resources)
        return types.ListResourcesResult(resources=[types.Resource(**r) for r in listed])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        uri = str(params.uri)
        try:
            text = await in_thread(stack.read_resource, uri)
        except LookupError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="text/markdown", text=text)])

    from hermes_core import __version__

    return Server("hermes-core", version=__version__,
                  instructions="The hermes-core memory stack: curated memory, the searchable "
                  "session archive, skills. Call recall with the user's message before answering.",
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_read_resource=read_resource)


def _legacy_client_name(ctx: Any) -> str | None:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    return getattr(info, "name", None)


def run_stdio(stack: StackServer) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from .unreadable import AnsweringReader

    server = build_server(stack)

    async def main() -> None:
        async with stdio_server() as (read, write):
            # a line that is not a JSON-RPC message gets its JSON-RPC error (the SDK drops it)
            await server.run(AnsweringReader(read, write), write,
                             server.create_initialization_options())

    anyio.run(main)


def _answer(status: int, payload: dict[str, Any], **headers: str) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(payload), status, headers, media_type="application/json")


def gate(app: Any, stack: StackServer, credential: Credential, allowed_origins: Sequence[str]
         ) -> Callable[..., Awaitable[None]]:
    """The ASGI application in front of the SDK's: health, token, origin (see the module doc);
    a client's ``DELETE`` of its session also ends its archived session. With origins listed, a
    listed origin's requests pass through CORS first (its preflight needs no token)."""
    import anyio.to_thread

    origins = frozenset(o.encode("latin-1") for o in allowed_origins)
    healthy = _answer(200, {"status": "ok"})
    unauthorized = _answer(401, {"error": "missing, wrong or revoked bearer token: send "
                                 "'Authorization: Bearer <token>' (the token is in the server's "
                                 "HERMES_CORE_MCP_TOKEN or its home's mcp-token file)"},
                           **{"www-authenticate": 'Bearer realm="hermes-core"'})
    forbidden = _answer(403, {"error": "this Origin is not allowed: list it in "
                              "mcp.allowed_origins (exact scheme://host[:port]) to let a web "
                              "page call the server"})

    async def gated(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if scope.get("path") == "/health" and scope.get("method") in ("GET", "HEAD"):
            await healthy(scope, receive, send)
            return
        if not credential.accepts(headers.get(b"authorization", b"")):
            await unauthorized(scope, receive, send)
            return
        origin = headers.get(b"origin")
        if origin is not None and origin not in origins:
            await forbidden(scope, receive, send)
            return
        await app(scope, receive, send)
        sid = headers.get(b"mcp-session-id")
        if scope.get("method") == "DELETE" and sid:
            await anyio.to_thread.run_sync(stack.end, f"http-session:{sid.decode('latin-1')}")

    if not origins:
        return gated
    from starlette.middleware.cors import CORSMiddleware

    inner: Any = gated  # an ASGI app (Starlette's types are narrower than this module's)
    cors = CORSMiddleware(inner, allow_origins=list(allowed_origins), allow_methods=_CORS_METHODS,
                          allow_headers=_CORS_HEADERS, expose_headers=["mcp-session-id"])

    async def pages(scope: dict[str, Any], receive: Any, send: Any) -> None:
        """A listed origin's requests through CORS (its preflight answered, no token needed;
        the rest gated as ever); any other request straight to the gate."""
        listed = scope["type"] == "http" and dict(scope.get("headers") or []).get(b"origin") in origins
        await (cors if listed else gated)(scope, receive, send)

    return pages


def _release_memory() -> None:
    """Give freed memory back to the system after sessions ended (glibc keeps it otherwise)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
            ctypes.CDLL(name).malloc_trim(0)


def _unix_socket(path: Path) -> socket.socket:
    """A listening Unix socket at ``path``, mode 0600 from the start; raises ServeError."""
    from hermes_core.httpguard import ACCEPT_BATCH

    if path.is_symlink() or (path.exists() and not stat.S_ISSOCK(path.lstat().st_mode)):
        raise ServeError(f"{path} exists and is not a socket: pick another --uds path")
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # left by a server that is gone
        else:
            raise ServeError(f"another server is listening on {path}: stop it or pick another "
                             "--uds path")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {path}: {exc.strerror}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(ACCEPT_BATCH)
    return sock


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn that, stopped by SIGTERM or SIGINT, returns instead of raising the signal again
        (which would kill the process before the archived sessions end and the socket goes)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", None)
                    if isinstance(captured, list):
                        captured.clear()

    return Server


def run_http(stack: StackServer, settings: McpConfig, credential: Credential,
             announce: Callable[[str], None], *, host: str, port: int, uds: Path | None,
             log_level: str) -> None:
    """Serve on ``host:port`` (or the Unix socket ``uds``) until interrupted, as ``settings``
    say; ``announce`` gets the URL once the socket listens."""
    import anyio
    import anyio.to_thread
    from mcp.server.transport_security import TransportSecuritySettings

    from hermes_core.httpguard import guarded_config

    local = uds is not None or is_loopback(host)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=local, allowed_hosts=_LOCAL_HOSTS if local else [],
        allowed_origins=list(settings.allowed_origins))
    idle_seconds = settings.session_idle_minutes * 60
    app = gate(build_server(stack).streamable_http_app(
        host=host, transport_security=security, session_idle_timeout=idle_seconds,
        max_sessions=settings.max_sessions), stack, credential, settings.allowed_origins)
    sock = _unix_socket(uds) if uds is not None else None
    config, _pending = guarded_config(
        app, header_timeout=settings.header_timeout_seconds,
        max_pending=settings.max_pending_connections, host=host, port=port, log_level=log_level,
        access_log=log_level in ("debug", "info"), lifespan="on", server_header=False)
    web = _server_class()(config)

    async def sweep() -> None:
        """End the archived sessions of connections idle as long as the SDK's own expiry."""
        interval = min(max(idle_seconds / 4, 0.2), 30.0)
        trims = 0
        while True:
            await anyio.sleep(interval)
            if await anyio.to_thread.run_sync(stack.expire_idle, idle_seconds):
                trims = 4  # the SDK frees its side of the sessions about now too: trim a while
            if trims:
                trims -= 1
                _release_memory()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            async def serve_then_stop() -> None:
                await web.serve(sockets=[sock] if sock is not None else None)
                tg.cancel_scope.cancel()  # the sweep too

            tg.start_soon(serve_then_stop)
            while not web.started:
                if web.should_exit:
                    return
                await anyio.sleep(0.02)
            if uds is not None:
                url = f"unix:{uds}"
            else:
                bound = web.servers[0].sockets[0].getsockname()[1] if web.servers else port
                shown = f"[{host}]" if ":" in host else host
                url = f"http://{shown}:{bound}/mcp"
            announce(url)
            tg.start_soon(sweep)

    try:
        anyio.run(main)
    finally:
        if sock is not None and uds is not None:
            sock.close()
            uds.unlink(missing_ok=True)
