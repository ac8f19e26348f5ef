"""A loopback Honcho-compatible server for tests: the v3 endpoints the provider uses, over real HTTP.

It speaks the subset of the Honcho v3 API listed in the project's providers reference (§2) with the
shapes and status codes observed against the real server (3.0.12): get-or-create ``POST``s answered
200, message and conclusion creation 201, conclusion deletion 204, ``{"detail": ...}`` errors (404
for an unknown workspace, peer, session or conclusion; 422 with FastAPI's ``[{loc, msg, type}]``
list for an invalid body), and the paginated ``{items, total, page, size, pages}`` list. The real
``honcho-ai`` SDK validates every answer with its pydantic models; this package's tests drive the
server with it, so a wrong shape fails there.

Data lives in a real SQLite file (:mod:`.store`): search is FTS5/bm25 ranking; the dialectic answer
and the session summary are deterministic extractive stand-ins for the real server's LLM (the only
faked behaviour). Switches make it misbehave on purpose (:class:`Fault`): an HTTP status (429 with
``Retry-After``, 500, 503 ...), a dropped connection (the socket closes with no answer), junk (a
200 whose body is not the endpoint's shape), and added latency.

It is built on hermes-core's loopback test server (:mod:`hermes_core.testing.loopback`, the
standard library's ``ThreadingHTTPServer``, as the kit's Messages API server is): no web framework
to install in a plugin's test environment, a thread per connection, and direct control of the
socket, which a dropped-connection switch needs. Bound to 127.0.0.1 on an ephemeral port unless
told otherwise.

From a test::

    with HonchoTestServer() as server:
        server.faults.append(Fault("status", status=503, times=2))
        ...  # point the client at server.url

From a shell: ``python -m hermes_core_honcho.testing.server --port 8765``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import sqlite3
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hermes_core.testing.loopback import LoopbackHandler, LoopbackServer, RecordedRequest

from .routes import ROUTES, Call
from .store import HonchoStore, StoreError

__all__ = ["Fault", "HonchoTestServer", "RecordedRequest", "main"]

_MAX_BODY = 16 * 1024 * 1024
#: stands for a body that is not valid JSON
_INVALID = object()


@dataclass
class Fault:
    """One way to misbehave, applied to matching requests.

    ``kind``: ``status`` (answer ``status`` with a ``{"detail"}`` body; ``retry_after`` adds the
    header), ``drop`` (close the connection without answering) or ``junk`` (a 200 whose body is
    not what the endpoint returns). ``times`` limits how many requests it hits (``None``: until
    removed); ``path`` is a regular expression searched in the request path.
    """

    kind: Literal["status", "drop", "junk"] = "status"
    status: int = 500
    times: int | None = None
    path: str | None = None
    retry_after: float | None = None
    hits: int = 0

    def matches(self, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return self.path is None or re.search(self.path, path) is not None


class HonchoTestServer(LoopbackServer):
    """The server on a background thread. ``db_path`` defaults to a file in a temporary folder.

    Attributes tests use: :attr:`url` (the base URL to give a client), :attr:`store` (the data),
    :attr:`faults` (a list of :class:`Fault`, checked in order), :attr:`latency` (seconds added to
    every answer) and :attr:`requests` (every request, in order).
    """

    def __init__(self, db_path: Path | None = None, *, port: int = 0,
                 api_key: str | None = None, summary_every: int = 20) -> None:
        super().__init__(port=port)
        self._tmp: str | None = None
        if db_path is None:
            self._tmp = tempfile.mkdtemp(prefix="honcho-test-server-")
            db_path = Path(self._tmp) / "honcho.db"
        self.db_path = db_path
        self.store = HonchoStore(db_path, summary_every=summary_every)
        self.api_key = api_key
        self.faults: list[Fault] = []
        self.latency = 0.0

    @property
    def url(self) -> str:
        return self.base_url

    def stop(self) -> None:
        """Stop serving (the port closes: clients see connection refused) and delete temp data."""
        super().stop()
        self.store.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def fault_for(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(path):
                    fault.hits += 1
                    return fault
        return None

    def requests_to(self, method: str, pattern: str) -> list[RecordedRequest]:
        """Recorded requests with this method whose path matches ``pattern`` (a regex)."""
        with self._lock:
            return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]


class _Handler(LoopbackHandler):
    api: HonchoTestServer
    server_version = "honcho-test-server"

    def do_GET(self) -> None:
        server = self.api
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self.close_connection = True
            self.send_json(413, {"detail": "Request body too large"})
            return
        raw = self.read_body()
        content_type = self.headers.get("Content-Type") or ""
        body: Any = None
        if raw and "json" in content_type:
            try:
                body = json.loads(raw)
            except ValueError:
                body = _INVALID  # answered with 422 below
        record = self.record(None if body is _INVALID else body,
                             headers={"authorization": "", "x-honcho-host": ""})
        server.wait(server.latency)
        if record.path.startswith("/_control/"):
            self._control(record.method, record.path, body)
            return
        fault = server.fault_for(record.path)
        if fault is not None and fault.kind == "drop":
            record.status = -1
            self.drop()  # nothing is written: the client sees the connection close
        elif fault is not None and fault.kind == "junk":
            self.send_json(200, {"unexpected": "this is not a Honcho response"})
        elif fault is not None:
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after else {}
            self.send_json(fault.status, {"detail": f"injected failure ({fault.status})"}, headers)
        else:
            self._dispatch(record, body, raw, content_type)

    do_POST = do_PUT = do_DELETE = do_GET

    def _authorized(self) -> bool:
        if self.api.api_key is None:
            return True
        return self.headers.get("Authorization") == f"Bearer {self.api.api_key}"

    def _dispatch(self, record: RecordedRequest, body: Any, raw: bytes, content_type: str) -> int:
        if not self._authorized():
            return self.send_json(401, {"detail": "Invalid or missing API key (Authorization: Bearer)"})
        if body is _INVALID:
            return self.send_json(422, {"detail": [{"loc": ["body"], "msg": "JSON decode error",
                                                    "type": "json_invalid"}]})
        allowed = False
        for route_method, pattern, handler in ROUTES:
            match = pattern.match(record.path)
            if match is None:
                continue
            allowed = True
            if route_method != record.method:
                continue
            call = Call(self.api.store, match.groupdict(), record.query, body, raw, content_type)
            try:
                status, payload = handler(call)
            except StoreError as exc:
                return self.send_json(exc.status, {"detail": exc.detail})
            except sqlite3.ProgrammingError:  # the server is stopping: its database is closed
                return self.send_json(503, {"detail": "the server is shutting down"})
            return self.send_json(status, payload)
        if allowed:
            return self.send_json(405, {"detail": "Method Not Allowed"})
        return self.send_json(404, {"detail": "Not Found"})

    def _control(self, method: str, path: str, body: Any) -> int:
        """``POST /_control/faults`` {faults: [...], latency}; ``DELETE`` clears (CLI use)."""
        server = self.api
        if path != "/_control/faults" or method not in ("POST", "DELETE"):
            return self.send_json(404, {"detail": "Not Found"})
        with server._lock:
            if method == "DELETE":
                server.faults.clear()
                server.latency = 0.0
                return self.send_json(204, None)
            try:
                faults = [Fault(**f) for f in (body or {}).get("faults", [])]
                latency = float((body or {}).get("latency", server.latency))
            except (TypeError, ValueError, AttributeError) as exc:
                return self.send_json(422, {"detail": f"bad fault description: {exc}"})
            server.faults[:] = faults
            server.latency = latency
        return self.send_json(200, {"faults": len(faults), "latency": latency})


HonchoTestServer.handler = _Handler


def main(argv: list[str] | None = None) -> int:
    """``python -m hermes_core_honcho.testing.server``: serve until interrupted."""
    parser = argparse.ArgumentParser(description="A loopback Honcho-compatible (v3) server for tests.")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file (default: a temp file)")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    parser.add_argument("--fail-status", type=int, default=None,
                        help="answer every API request with this status (429, 500, 503 ...)")
    parser.add_argument("--drop", action="store_true", help="drop every API connection unanswered")
    args = parser.parse_args(argv)
    server = HonchoTestServer(args.db, port=args.port, api_key=args.api_key)
    server.latency = args.latency
    if args.fail_status:
        server.faults.append(Fault("status", status=args.fail_status))
    if args.drop:
        server.faults.append(Fault("drop"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"honcho test server listening on {server.url} (data: {server.db_path})", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
