"""Running the application under uvicorn on a thread of its own (the kernel's
:class:`~hermes_core.httpguard.GuardedServer`).

The socket is bound here, before uvicorn sees it, for two reasons: a port in use becomes a clear
error in the caller (uvicorn would log and ``sys.exit`` inside its thread), and port 0 yields the
port the system picked (tests and benchmarks use it).
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any

from hermes_core.errors import HermesCoreError
from hermes_core.httpguard import GuardedServer, PendingConnections, listen
from hermes_core.netaddr import is_loopback

__all__ = ["WebhookServer", "WebhookStartError", "is_loopback"]

log = logging.getLogger("hermes_core.plugins.webhook")
_START_TIMEOUT = 15.0


class WebhookStartError(HermesCoreError):
    """The server could not start: no secret, the port is taken, the address is wrong."""


def _bind(host: str, port: int) -> socket.socket:
    try:
        return listen(host, port)
    except socket.gaierror as exc:
        raise WebhookStartError(f"cannot listen on {host!r}: {exc.strerror}; give an IP address "
                                "or a resolvable name with --host (webhook.host)") from None
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise WebhookStartError(f"port {port} on {host} is already in use (another server?); "
                                    "pick another with --port or webhook.port") from None
        if exc.errno == errno.EACCES:
            raise WebhookStartError(f"not allowed to listen on {host}:{port}; ports below 1024 "
                                    "need privileges: pick another with --port") from None
        raise WebhookStartError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


class WebhookServer:
    """uvicorn serving ``app`` on ``host:port`` from a daemon thread."""

    def __init__(self, app: Any, host: str, port: int, *, shutdown_seconds: int = 30,
                 header_timeout: float = 10.0, max_pending_connections: int = 64,
                 body_timeout: float = 30.0) -> None:
        self.app = app
        self.options = {"header_timeout": header_timeout, "max_pending": max_pending_connections,
                        "body_timeout": body_timeout}
        self.pending: PendingConnections | None = None
        self.host = host
        self.requested_port = port
        self.shutdown_seconds = shutdown_seconds
        self.port = port
        self._served: GuardedServer | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind, start serving and return once requests are accepted."""
        served = GuardedServer(
            self.app, _bind(self.host, self.requested_port), **self.options, log_level="warning",
            access_log=False, lifespan="off", timeout_graceful_shutdown=self.shutdown_seconds,
            server_header=False)
        self._served, self.pending, self.port = served, served.pending, served.port
        try:
            served.start("webhook-server", _START_TIMEOUT)
        except RuntimeError as exc:
            self.stop()
            raise WebhookStartError(f"the webhook server {exc}") from None
        if not is_loopback(self.host):
            log.warning("the webhook listens on %s, reachable from the network; every request "
                        "must still carry a valid signature", self.url)

    def stop(self) -> None:
        """Stop accepting, let requests in flight finish (up to ``shutdown_seconds``), join."""
        if self._served is not None:
            self._served.stop(self.shutdown_seconds + 5)
