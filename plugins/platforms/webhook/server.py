"""Running the application under uvicorn on a thread of its own.

The socket is bound here, before uvicorn sees it, for two reasons: a port in use becomes a clear
error in the caller (uvicorn would log and ``sys.exit`` inside its thread), and port 0 yields the
port the system picked (tests and benchmarks use it).
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from typing import Any

from hermes_core.errors import HermesCoreError
from hermes_core.netaddr import is_loopback

__all__ = ["WebhookServer", "WebhookStartError", "is_loopback"]

log = logging.getLogger("hermes_core.plugins.webhook")
_START_TIMEOUT = 15.0
_ACCEPT_BATCH = 64


class WebhookStartError(HermesCoreError):
    """The server could not start: no secret, the port is taken, the address is wrong."""




def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise WebhookStartError(f"cannot listen on {host!r}: {exc.strerror}; give an IP address "
                                "or a resolvable name with --host (webhook.host)") from None
    family, kind, proto, _name, address = infos[0]
    # the proto getaddrinfo gives (IPPROTO_TCP), never 0: asyncio sets TCP_NODELAY only on
    # connections accepted by a listener whose proto is IPPROTO_TCP, and without it an answer
    # sent as headers then body waits ~40 ms for the client's delayed ACK on every keep-alive
    # request (bench: 44 ms p50 with proto 0, 0.8 ms with IPPROTO_TCP)
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise WebhookStartError(f"port {port} on {host} is already in use (another server?); "
                                    "pick another with --port or webhook.port") from None
        if exc.errno == errno.EACCES:
            raise WebhookStartError(f"not allowed to listen on {host}:{port}; ports below 1024 "
                                    "need privileges: pick another with --port") from None
        raise WebhookStartError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


class WebhookServer:
    """uvicorn serving ``app`` on ``host:port`` from a daemon thread."""

    def __init__(self, app: Any, host: str, port: int, *, shutdown_seconds: int = 30,
                 header_timeout: float = 10.0, max_pending_connections: int = 64,
                 body_timeout: float = 30.0) -> None:
        self.app = app
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.max_pending_connections = max_pending_connections
        self.pending: Any = None
        self.host = host
        self.requested_port = port
        self.shutdown_seconds = shutdown_seconds
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind, start serving and return once requests are accepted."""
        import uvicorn

        from hermes_core.httpguard import guarded_protocol

        protocol, self.pending = guarded_protocol(self.header_timeout, self.max_pending_connections,
                                                  self.body_timeout)
        sock = _bind(self.host, self.requested_port)
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=self.shutdown_seconds, server_header=False,
            http=protocol,  # h11 with a header deadline and a cap on unsigned connections
            # asyncio accepts up to `backlog` connections in one go before any of them is looked
            # at; a small batch keeps a flood of sockets from using up the file descriptors
            # before the cap above can close the surplus
            backlog=_ACCEPT_BATCH,
        )
        self._server = uvicorn.Server(config)

        def run() -> None:
            try:
                self._server.run(sockets=[sock])
            except BaseException as exc:  # SystemExit included: uvicorn exits on fatal errors
                self._error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name="webhook-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._server.started:
            self._thread.join(0.01)
            if not self._thread.is_alive():
                raise WebhookStartError(f"the webhook server stopped while starting: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise WebhookStartError(f"the webhook server did not start in {_START_TIMEOUT:.0f} s")
        if not is_loopback(self.host):
            log.warning("the webhook listens on %s, reachable from the network; every request "
                        "must still carry a valid signature", self.url)

    def stop(self) -> None:
        """Stop accepting, let requests in flight finish (up to ``shutdown_seconds``), join."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self.shutdown_seconds + 5)
        self._thread = None
