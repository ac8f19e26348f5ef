"""One log line per HTTP request the webhook answered, as a web server's access log has.

``127.0.0.1:50412 "POST /messages" 401 1.8 ms: the signature does not match: ...``: the client's
address, the method and path (never the query string, the headers or the body), the status, the
time to the last byte, and for a refused or failed request the reason the client was given
(:func:`note_reason`). Logged on ``hermes_core.plugins.webhook.access``: INFO, or WARNING for a
5xx, so ``serve`` writes every line to the home's ``logs/hermes-core.log`` at its default level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request

__all__ = ["AccessLog", "note_reason"]

log = logging.getLogger("hermes_core.plugins.webhook.access")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_REASON = "hermes_core_reason"
#: a reason is the client's own answer; a line stays one line of bounded length
_MAX_REASON = 300


def note_reason(request: Request, reason: str) -> None:
    """Have the access line of ``request`` say why it was refused or failed."""
    setattr(request.state, _REASON, reason)


class AccessLog:
    """ASGI middleware writing the access line of every HTTP request, also one that raised."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        # made here so that the application's request.state (a scope copied on the way down
        # included) and this line share the one dict
        state = scope.setdefault("state", {})
        status = 500  # what the server answers when the application raises before a response

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            _write(scope, status, (time.perf_counter() - started) * 1000, state.get(_REASON))


def _write(scope: Scope, status: int, ms: float, reason: object) -> None:
    client = scope.get("client")
    who = f"{client[0]}:{client[1]}" if client else "-"
    tail = ""
    if reason:
        text = " ".join(str(reason).split())  # one line, whatever the reason held
        tail = ": " + (text if len(text) <= _MAX_REASON else text[:_MAX_REASON] + "...")
    log.log(logging.WARNING if status >= 500 else logging.INFO, '%s "%s %s" %d %.1f ms%s',
            who, scope.get("method", "-"), scope.get("path", "-"), status, ms, tail)
