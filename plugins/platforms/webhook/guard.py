"""Bounding connections that have not yet sent a request: the header deadline and the cap.

uvicorn starts no timer until a connection's first response is sent, so a client that opens a
socket and trickles (or never sends) its request line would hold a file descriptor forever; a few
hundred such sockets, no signature needed, starve the server of descriptors and ``/health`` stops
answering. :func:`guarded_protocol` makes a subclass of uvicorn's h11 protocol that

* closes a connection that has not finished its request line and headers within
  ``header_timeout`` seconds of its first byte (of connecting, for a new connection), and
* keeps at most ``max_pending`` such connections: a new one closes the one waiting longest, so
  fresh clients (a health check, a real request) always get in.

The body's own deadline is the application's (``webhook.body_timeout_seconds``, answered 408).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["PendingConnections", "guarded_protocol"]


class PendingConnections:
    """The connections of one server that are still sending headers, oldest first."""

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self._waiting: dict[Any, None] = {}
        #: connections closed for being slow or crowded out (for tests and logs)
        self.timed_out = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, protocol: _GuardedH11) -> None:
        self._waiting[protocol] = None
        while len(self._waiting) > self.max_pending:
            oldest = next(iter(self._waiting))
            self.discard(oldest)
            self.evicted += 1
            oldest.close_pending()

    def discard(self, protocol: Any) -> None:
        self._waiting.pop(protocol, None)


class _GuardedH11(H11Protocol):
    pending: PendingConnections
    header_timeout: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._header_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            self._headers_done()
        elif self.conn.their_state is h11.IDLE:
            self._await_headers()  # part of a request line or headers: the clock runs
        else:
            self._headers_done()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_done()
        super().connection_lost(exc)

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
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self.pending.discard(self)
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(header_timeout: float, max_pending: int) -> tuple[type[H11Protocol],
                                                                        PendingConnections]:
    """A protocol class for ``uvicorn.Config(http=...)`` and the registry its instances share."""
    pending = PendingConnections(max_pending)
    cls = type("GuardedH11Protocol", (_GuardedH11,),
               {"pending": pending, "header_timeout": header_timeout})
    return cls, pending
