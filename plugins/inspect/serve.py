"""Serving the inspector: a bound loopback socket, uvicorn with the kernel's connection guard
(:mod:`hermes_core.httpguard`), in the foreground or on a thread (tests, the benchmark)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from hermes_core.httpguard import ACCEPT_BATCH, guarded_protocol

__all__ = ["Running", "bind", "make_server", "start_thread"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: a small answer is sent at once, not held back for the
    # client's delayed acknowledgement (~40 ms per request otherwise)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(ACCEPT_BATCH)
    sock.setblocking(False)
    return sock


def make_server(app: Any, *, log_level: str = "warning") -> Any:
    import uvicorn

    protocol, _pending = guarded_protocol(header_timeout=10.0, max_pending=64)
    config = uvicorn.Config(app, http=protocol, backlog=ACCEPT_BATCH, log_level=log_level,
                            access_log=False, lifespan="off")
    return uvicorn.Server(config)


@dataclass
class Running:
    """A server on a thread: its base URL, and how to stop it."""

    url: str
    server: Any
    thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_thread(app: Any, host: str = "127.0.0.1", port: int = 0,
                 timeout: float = 20.0) -> Running:
    """Serve ``app`` on a daemon thread; returns once the server accepts connections."""
    sock = bind(host, port)
    server = make_server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="hermes-core-inspect")
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the inspector's server did not start")
        time.sleep(0.01)
    bound = sock.getsockname()
    return Running(f"http://{host}:{bound[1]}", server, thread)
