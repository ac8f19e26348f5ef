"""The base of the kit's loopback HTTP servers for tests (an example: docs/testing.md).

A :class:`LoopbackServer` is a real HTTP/1.1 server (the standard library's
``ThreadingHTTPServer``: nothing to install, a thread per connection, direct control of the
socket) on 127.0.0.1, an ephemeral port unless told, serving from a daemon thread. It records
every request and gives its :class:`LoopbackHandler` what fault injection needs: a delay cut short
by :meth:`~LoopbackServer.stop` (a slow or hung answer), any status with any headers, and a
connection closed unanswered or reset. :class:`~hermes_core.testing.MessagesAPIServer`,
:class:`~hermes_core.testing.OpenAIAPIServer` and hermes-core-honcho's test server are built on it.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

__all__ = ["LoopbackHandler", "LoopbackServer", "RecordedRequest"]

#: how long :meth:`LoopbackServer.start` waits for the serving thread to enter its loop
_START_TIMEOUT = 5.0


@dataclass
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    #: the request's headers, names lower-cased
    headers: dict[str, str]
    #: the parsed body (``None`` when there was none or it was not JSON)
    body: Any
    #: the status code the server answered with (0: none yet, or no answer)
    status: int = 0
    #: the query string's parameters (the last value of each)
    query: dict[str, str] = field(default_factory=dict)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    #: the listen backlog: the standard library's 5 overflows when a few dozen clients connect
    #: at once (two serve nodes opening their pools), and the kernel then resets connections
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.serving = threading.Event()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.serving.set()
        super().serve_forever(poll_interval)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up (a timeout, a closed pool) is normal here; anything else is a bug
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class LoopbackServer:
    """A loopback server on a thread; use it as a context manager (or :meth:`start` /
    :meth:`stop`). Subclasses set :attr:`handler`; its requests see the server as ``self.api``.
    """

    handler: type[LoopbackHandler]
    #: how often the serving loop checks for :meth:`stop` (short: every test stops a server)
    poll_interval = 0.02

    def __init__(self, *, port: int = 0) -> None:
        self.requests: list[RecordedRequest] = []
        self._requested_port = port
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        """Bind 127.0.0.1 and serve; returns once the serving loop runs (a second call does
        nothing). Returns the server."""
        if self._httpd is not None:
            return self
        handler = type(self.handler.__name__, (self.handler,), {"api": self})
        httpd = _HTTPServer(("127.0.0.1", self._requested_port), handler)
        self._stopping.clear()
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, args=(self.poll_interval,),
                                        name=type(self).__name__, daemon=True)
        self._thread.start()
        if not httpd.serving.wait(_START_TIMEOUT):
            self.stop()
            raise RuntimeError(f"{type(self).__name__} did not start serving "
                               f"in {_START_TIMEOUT:g} s")
        return self

    def stop(self) -> None:
        """Stop serving (the port closes: clients see connection refused); answers still
        waiting on a delay are cut short."""
        self._stopping.set()
        httpd, thread, self._httpd, self._thread = self._httpd, self._thread, None, None
        if httpd is not None:
            if httpd.serving.is_set():  # shutdown() waits for a loop that ran
                httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running: use it in a 'with' block or call start()")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The server's URL, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server stops first; True if it is still running."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


class LoopbackHandler(BaseHTTPRequestHandler):
    """One connection's requests; ``api`` is the :class:`LoopbackServer`."""

    api: LoopbackServer
    protocol_version = "HTTP/1.1"
    #: headers and body go out in separate writes: without TCP_NODELAY the body waits for the
    #: client's delayed ACK (about 40 ms per keep-alive request)
    disable_nagle_algorithm = True
    #: the request being answered: :meth:`send_json` fills in its status
    current: RecordedRequest | None = None

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests
        return

    def read_body(self) -> bytes:
        """The request's body (``Content-Length`` bytes)."""
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def record(self, body: Any, headers: dict[str, str] | None = None) -> RecordedRequest:
        """Record this request (``headers``: defaults for absent ones) and make it current."""
        split = urlsplit(self.path)
        sent = {k.lower(): v for k, v in self.headers.items()}
        self.current = RecordedRequest(
            method=self.command, path=split.path, headers={**(headers or {}), **sent},
            body=body, query={k: v[-1] for k, v in parse_qs(split.query).items()})
        self.api.record(self.current)
        return self.current

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> int:
        """Answer ``status`` with ``payload`` as JSON (``None``: an empty body) and ``headers``."""
        data = b"" if payload is None else json.dumps(payload).encode()
        if self.current is not None:
            self.current.status = status
        self.send_response(status)
        if data:
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if data:
            self.wfile.write(data)
        return status

    def drop(self, *, reset: bool = False) -> None:
        """Answer nothing: the connection closes (with ``reset``, with an RST instead of a FIN)."""
        self.close_connection = True
        if reset:  # SO_LINGER with a zero timeout: close() sends RST instead of FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
