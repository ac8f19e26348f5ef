"""Serving the inspector: a bound loopback socket, uvicorn with the kernel's connection guard
(:mod:`hermes_core.httpguard`), in the foreground or on a thread (tests, the benchmark)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from hermes_core.httpguard import GuardedServer, listen

__all__ = ["Running", "bind", "make_server", "start_thread"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port)."""
    return listen(host, port, socket.AF_INET6 if ":" in host else socket.AF_INET)


def make_server(app: Any, sock: socket.socket, *, log_level: str = "warning") -> GuardedServer:
    return GuardedServer(app, sock, log_level=log_level, access_log=False, lifespan="off")


@dataclass
class Running:
    """A server on a thread: its base URL, and how to stop it."""

    url: str
    server: GuardedServer

    def stop(self, timeout: float = 10.0) -> None:
        self.server.stop(timeout)


def start_thread(app: Any, host: str = "127.0.0.1", port: int = 0,
                 timeout: float = 20.0) -> Running:
    """Serve ``app`` on a daemon thread; returns once the server accepts connections."""
    server = make_server(app, bind(host, port))
    try:
        server.start("hermes-core-inspect", timeout)
    except RuntimeError:
        raise RuntimeError("the inspector's server did not start") from None
    return Running(f"http://{host}:{server.port}", server)
