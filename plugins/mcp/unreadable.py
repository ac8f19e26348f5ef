"""Answering the stdio lines the mcp SDK cannot read, as JSON-RPC 2.0 says a server must.

The SDK's stdio transport turns a line that is not a JSON-RPC message into an ``Exception`` on its
read stream, and its server only logs that: the client gets no answer, and a client waiting on a
request it garbled waits for ever. :class:`AnsweringReader` sits between the transport's read
stream and the server (same interface, nothing else changed) and answers each such line on the
transport's write stream, before the next line is read:

- not JSON: ``{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, ...}}`` (Parse error);
- JSON but not a JSON-RPC message: code -32600 (Invalid Request), with the line's ``id`` when it
  has a ``method`` and a string or integer ``id`` (so the client's pending request ends), else
  ``id: null``;
- a blank line carries no message and gets no answer.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

__all__ = ["AnsweringReader", "answer_for"]

log = logging.getLogger("hermes_core.plugins.mcp")


def _request_id(errors: list[Any]) -> str | int | None:
    """The ``id`` of the request a validation failed on, when the errors show the whole object."""
    for error in errors:
        value = error.get("input")
        if isinstance(value, dict) and isinstance(value.get("method"), str):
            ident = value.get("id")
            if isinstance(ident, (str, int)) and not isinstance(ident, bool):
                return ident
    return None


def answer_for(exc: Exception) -> Any | None:
    """The JSON-RPC error answering the line that raised ``exc`` (a ``JSONRPCError``), or None
    (a blank line, or a failure that is not the line's)."""
    import mcp_types as types
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    unparsed = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if unparsed is not None:
        line = unparsed.get("input")
        if isinstance(line, str) and not line.strip():
            return None
        return types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR,
            message=f"Parse error: the line is not JSON ({unparsed.get('msg', 'invalid JSON')}); "
                    "send one JSON-RPC 2.0 message per line. Nothing was done."))
    return types.JSONRPCError(jsonrpc="2.0", id=_request_id(errors), error=types.ErrorData(
        code=types.INVALID_REQUEST,
        message='Invalid Request: the line is JSON but not a JSON-RPC 2.0 message (a request '
                'has "jsonrpc": "2.0", a string or integer "id", a string "method" and object '
                '"params"). Nothing was done.'))


class AnsweringReader:
    """The transport's read stream, minus the lines it could not read, which it answers on
    ``write`` (see the module docstring). The sender's context of each message passes through
    (``last_context``)."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        import anyio
        from mcp.shared.message import SessionMessage

        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = answer_for(item)
            if answer is None:
                log.debug("mcp stdio: an unreadable item, not answered: %r", item)
                continue
            try:
                await self._write.send(SessionMessage(answer))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                log.debug("mcp stdio: the connection closed before a parse error was answered")

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringReader:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc_val: BaseException | None, exc_tb: TracebackType | None) -> None:
        await self.aclose()
