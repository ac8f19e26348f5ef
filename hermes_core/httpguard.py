"""Bounding HTTP connections that have not yet sent a request: the header deadline and the cap.

A public kernel module: every HTTP front end of hermes-core (the webhook platform, ``mcp serve
--transport http``, third-party platforms) serves through it, so the rule lives in one place.

uvicorn starts no timer until a connection's first response is sent, so a client that opens a
socket and trickles (or never sends) its request line would hold a file descriptor forever; a few
hundred such sockets, no credential needed, starve the server of descriptors and even a health
check stops answering. :func:`guarded_protocol` makes a subclass of uvicorn's h11 protocol that

* closes a connection that has not finished its request line and headers within
  ``header_timeout`` seconds of its first byte (of connecting, for a new connection), and
* keeps at most ``max_pending`` such connections: a new one closes the one waiting longest, so
  fresh clients (a health check, a real request) always get in, and
* closes a connection whose request body is still arriving ``body_timeout`` seconds after its
  headers. An application may answer such a body with 408 first where it reads one; this is the
  backstop for routes that never read theirs.

Serve it with ``uvicorn.Config(http=protocol, backlog=ACCEPT_BATCH)``: asyncio accepts up to
``backlog`` connections in one go before any of them is looked at, so a small batch keeps a flood
of sockets from using up the file descriptors before the cap can close the surplus.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ACCEPT_BATCH", "PendingConnections", "guarded_protocol"]

#: the listen backlog to pair with the protocol (see the module doc)
ACCEPT_BATCH = 64


class PendingConnections:
    """The connections of one server that are still sending headers, oldest first."""

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self._waiting: dict[Any, None] = {}
        #: connections closed for being slow or crowded out (for tests and logs)
        self.timed_out = 0
        self.evicted = 0
        #: the most connections ever waiting at once (never above ``max_pending``)
        self.peak = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, protocol: _GuardedH11) -> None:
        self._waiting[protocol] = None
        while len(self._waiting) > self.max_pending:
            oldest = next(iter(self._waiting))
            self.discard(oldest)
            self.evicted += 1
            oldest.close_pending()
        self.peak = max(self.peak, len(self._waiting))

    def discard(self, protocol: Any) -> None:
        self._waiting.pop(protocol, None)


#: the application's own 408 comes first; this much later the connection is closed regardless
_BODY_GRACE = 2.0


class _GuardedH11(H11Protocol):
    pending: PendingConnections
    header_timeout: float
    body_timeout: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if self.transport.is_closing():
            self._headers_done()
            self._body_done()
        elif state is h11.IDLE:
            self._await_headers()  # part of a request line or headers: the clock runs
        elif state is h11.SEND_BODY:
            self._headers_done()
            self._await_body()
        else:
            self._headers_done()
            self._body_done()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_done()
        self._body_done()
        super().connection_lost(exc)

    def _await_body(self) -> None:
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout + _BODY_GRACE,
                                                    self._body_too_slow)

    def _body_done(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self.pending.timed_out += 1
            self.transport.close()

    def _await_headers(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)
            self.pending.add(self)

    def _headers_done(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self.pending.discard(self)

    def _too_slow(self) -> None:
        self._header_timer = None
        self.pending.timed_out += 1
        self.close_pending()

    def close_pending(self) -> None:
        """Close a connection that never completed its headers (nothing was answered on it)."""
        self._headers_done()
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(header_timeout: float, max_pending: int, body_timeout: float = 30.0,
                     ) -> tuple[type[H11Protocol], PendingConnections]:
    """A protocol class for ``uvicorn.Config(http=...)`` and the registry its instances share."""
    pending = PendingConnections(max_pending)
    cls = type("GuardedH11Protocol", (_GuardedH11,),
               {"pending": pending, "header_timeout": header_timeout,
                "body_timeout": body_timeout})
    return cls, pending
