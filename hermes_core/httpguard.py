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

Serve it with ``uvicorn.Config(http=protocol, backlog=ACCEPT_BATCH)`` (:func:`guarded_config`
makes both): asyncio accepts up to ``backlog`` connections in one go before any of them is looked
at, so a small batch keeps a flood of sockets from using up the file descriptors before the cap
can close the surplus. :func:`listen` binds the socket before uvicorn sees it (a port in use is an
error in the caller, and port 0 yields the port the system picked); :class:`GuardedServer` serves
it in the foreground or from a daemon thread.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ACCEPT_BATCH", "GuardedServer", "PendingConnections", "guarded_config",
           "guarded_protocol", "listen"]

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


def guarded_config(app: Any, *, header_timeout: float = 10.0, max_pending: int = 64,
                   body_timeout: float = 30.0, **options: Any
                   ) -> tuple[uvicorn.Config, PendingConnections]:
    """A ``uvicorn.Config`` serving ``app`` through :func:`guarded_protocol` (with ``backlog``
    :data:`ACCEPT_BATCH`; ``options`` are the Config's others), and the protocol's registry."""
    protocol, pending = guarded_protocol(header_timeout, max_pending, body_timeout)
    return uvicorn.Config(app, http=protocol, backlog=ACCEPT_BATCH, **options), pending


def listen(host: str, port: int, family: int = socket.AF_UNSPEC) -> socket.socket:
    """A non-blocking TCP socket listening on ``host:port`` (0: a free port), of the first
    address ``host`` resolves to in ``family``; raises ``OSError`` (``socket.gaierror`` for a name
    that does not resolve)."""
    family, kind, proto, _name, address = socket.getaddrinfo(
        host, port, family, socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    # the proto getaddrinfo gives (IPPROTO_TCP), never 0: asyncio sets TCP_NODELAY only on
    # connections accepted by a listener whose proto is IPPROTO_TCP, and without it an answer
    # sent as headers then body waits ~40 ms for the client's delayed ACK on every keep-alive
    # request (bench: 44 ms p50 with proto 0, 0.8 ms with IPPROTO_TCP)
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(ACCEPT_BATCH)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class GuardedServer:
    """uvicorn serving ``app`` on ``sock`` (see :func:`listen`) through the guarded protocol:
    :meth:`run` in the foreground, or :meth:`start` on a daemon thread and :meth:`stop`.
    ``options`` go to :func:`guarded_config`."""

    def __init__(self, app: Any, sock: socket.socket, **options: Any) -> None:
        config, self.pending = guarded_config(app, **options)
        self.server = uvicorn.Server(config)
        self.sock = sock
        self.port = int(sock.getsockname()[1])
        self.thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Serve until stopped; the socket is closed afterwards."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def _run_keeping_error(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # SystemExit included: uvicorn exits on fatal errors
            self._error = exc

    def start(self, name: str, timeout: float) -> None:
        """Serve from a daemon thread named ``name``; return once requests are accepted. Raises
        ``RuntimeError`` saying ``stopped while starting: <error>`` or ``did not start in <timeout>
        s`` (the server is then told to exit)."""
        self.thread = threading.Thread(target=self._run_keeping_error, name=name, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            self.thread.join(0.01)
            if not self.thread.is_alive():
                raise RuntimeError(f"stopped while starting: {self._error!r}")
            if time.monotonic() > deadline:
                self.server.should_exit = True
                raise RuntimeError(f"did not start in {timeout:.0f} s")

    def stop(self, timeout: float) -> None:
        """Stop accepting, let requests in flight finish, and join the thread (up to ``timeout``)."""
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout)
        self.thread = None
