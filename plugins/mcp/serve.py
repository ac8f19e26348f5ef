"""``hermes-core mcp serve``: the MCP handlers over stdio or streamable HTTP.

The handlers are thin: each runs the synchronous :class:`~.server.StackServer` call in a worker
thread. Over HTTP the server binds 127.0.0.1 by default; bound to any other address it refuses to
start unless a bearer token is set in the environment variable named by ``mcp.token_env``
(``HERMES_CORE_MCP_TOKEN`` by default), and then every request must carry
``Authorization: Bearer <token>``. A token set while on loopback is enforced too.
"""

from __future__ import annotations

import hmac
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hermes_core.netaddr import is_loopback

from .server import StackServer, connection_key

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["ServeError", "build_server", "is_loopback", "require_token", "run_http", "run_stdio"]

log = logging.getLogger("hermes_core.plugins.mcp")


class ServeError(Exception):
    """The server cannot start as asked; the message says how to fix it."""




def require_token(host: str, token_env: str) -> str | None:
    """The bearer token to demand, or ``None`` (loopback without a token). Raises
    :class:`ServeError` for a non-loopback address without one."""
    token = os.environ.get(token_env, "").strip() or None
    if token is None and not is_loopback(host):
        raise ServeError(
            f"refusing to serve MCP over HTTP on {host}: off loopback every request must carry a "
            f"bearer token, and {token_env} is not set. Set {token_env} to a long random secret "
            "(clients send 'Authorization: Bearer <it>'), or bind 127.0.0.1")
    if token is not None and len(token) < 16:
        raise ServeError(f"{token_env} is too short to be a bearer token: use at least 16 "
                         "random characters")
    return token


def build_server(stack: StackServer) -> Server[Any]:
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
        session = await in_thread(stack.session_for, key, name)
        try:
            answer = await in_thread(stack.call, params.name, params.arguments, session)
        except LookupError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
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


def _bearer(app: Any, token: str) -> Callable[..., Awaitable[None]]:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                body = b'{"error": "missing or wrong bearer token (Authorization: Bearer ...)"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def run_http(stack: StackServer, *, host: str, port: int, token: str | None,
             announce: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted; ``announce`` gets the URL once the socket listens."""
    import anyio
    import uvicorn

    server = build_server(stack)
    app: Any = server.streamable_http_app(host=host)
    if token is not None:
        app = _bearer(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(web.serve)
            while not web.started:
                if web.should_exit:
                    return
                await anyio.sleep(0.02)
            bound = web.servers[0].sockets[0].getsockname()[1] if web.servers else port
            shown = f"[{host}]" if ":" in host else host
            (announce or _stderr)(f"http://{shown}:{bound}/mcp")

    anyio.run(main)


def _stderr(url: str) -> None:
    print(f"hermes-core mcp: serving on {url}", file=sys.stderr, flush=True)
