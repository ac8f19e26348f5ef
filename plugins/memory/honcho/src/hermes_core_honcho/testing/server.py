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

It is built on the standard library's ``ThreadingHTTPServer`` (as hermes-core's own loopback
Messages API server is): no web framework to install in a plugin's test environment, a thread per
connection, and direct control of the socket, which a dropped-connection switch needs. Bound to
127.0.0.1 on an ephemeral port unless told otherwise.

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
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from .store import HonchoStore, StoreError, Unprocessable, check_id

__all__ = ["Fault", "HonchoTestServer", "RecordedRequest", "main"]

_MAX_BODY = 16 * 1024 * 1024
_W = r"/v3/workspaces/(?P<w>[^/]+)"
_MESSAGE_KEYS = {"content", "peer_id", "metadata", "created_at", "configuration"}
_CONCLUSION_KEYS = {"content", "observer_id", "observed_id", "session_id"}
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


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[["_Call"], tuple[int, Any]]


@dataclass
class _Call:
    store: HonchoStore
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    raw: bytes
    content_type: str

    def json_body(self) -> dict[str, Any]:
        if not isinstance(self.body, dict):
            raise Unprocessable(["body"], "Input should be a valid dictionary (a JSON object)")
        return self.body

    def flag(self, name: str, default: bool) -> bool:
        value = self.query.get(name)
        return default if value is None else value.lower() in ("true", "1", "yes")

    def integer(self, name: str, default: int | None, low: int = 1, high: int = 100_000) -> int | None:
        value = self.query.get(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise Unprocessable(["query", name], "Input should be a valid integer") from None
        if not low <= number <= high:
            raise Unprocessable(["query", name], f"Input should be between {low} and {high}")
        return number


def _text(body: dict[str, Any], key: str, *, low: int = 1, high: int = 10_000,
          required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not low <= len(value) <= high:
        raise Unprocessable(["body", key], f"a string of {low}-{high} characters is required")
    return value


def _items(body: dict[str, Any], key: str, allowed: set[str], required: set[str]) -> list[dict[str, Any]]:
    items = body.get(key)
    if not isinstance(items, list) or not 1 <= len(items) <= 100:
        raise Unprocessable(["body", key], "List should have 1 to 100 items")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise Unprocessable(["body", key, i], "Input should be a valid dictionary")
        for extra in set(item) - allowed:
            raise Unprocessable(["body", key, i, extra], "Extra inputs are not permitted")
        for name in required:
            if not isinstance(item.get(name), str) or not item[name]:
                raise Unprocessable(["body", key, i, name], "Field required (a non-empty string)")
    return items


# ---------------------------------------------------------------------------------- endpoints


def _workspace(c: _Call) -> tuple[int, Any]:
    return 200, c.store.workspace(c.json_body())


def _peer(c: _Call) -> tuple[int, Any]:
    return 200, c.store.peer(c.params["w"], c.json_body())


def _session(c: _Call) -> tuple[int, Any]:
    return 200, c.store.session(c.params["w"], c.json_body())


def _session_peers(c: _Call) -> tuple[int, Any]:
    return 200, c.store.add_session_peers(c.params["w"], c.params["s"], c.json_body())


def _peer_config(c: _Call) -> tuple[int, Any]:
    return 200, c.store.peer_config(c.params["w"], c.params["s"], c.params["p"])


def _context(c: _Call) -> tuple[int, Any]:
    return 200, c.store.context(
        c.params["w"], c.params["s"], tokens=c.integer("tokens", None, 1, 1_000_000),
        peer_target=c.query.get("peer_target"), peer_perspective=c.query.get("peer_perspective"),
        search_query=c.query.get("search_query"), summary=c.flag("summary", True))


def _add_messages(c: _Call) -> tuple[int, Any]:
    items = _items(c.json_body(), "messages", _MESSAGE_KEYS, {"content", "peer_id"})
    for i, item in enumerate(items):
        check_id(item["peer_id"], ["body", "messages", i, "peer_id"])
        if item.get("metadata") is not None and not isinstance(item["metadata"], dict):
            raise Unprocessable(["body", "messages", i, "metadata"], "Input should be a valid dictionary")
    return 201, c.store.add_messages(c.params["w"], c.params["s"], items)


def _upload(c: _Call) -> tuple[int, Any]:
    head = f"Content-Type: {c.content_type}\r\n\r\n".encode()
    parsed = BytesParser(policy=email_policy).parsebytes(head + c.raw)
    fields: dict[str, Any] = {}
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            fields[str(name)] = part.get_payload(decode=True) or b""
    if "file" not in fields or "peer_id" not in fields:
        raise Unprocessable(["body", "file" if "file" not in fields else "peer_id"], "Field required")
    peer_id = check_id(fields["peer_id"].decode("utf-8", "replace"), ["body", "peer_id"])
    metadata = json.loads(fields["metadata"].decode()) if fields.get("metadata") else {}
    text = fields["file"].decode("utf-8", "replace")
    chunks = [text[i:i + 8000] for i in range(0, len(text), 8000)] or [""]
    items = [{"content": chunk, "peer_id": peer_id, "metadata": metadata} for chunk in chunks]
    return 201, c.store.add_messages(c.params["w"], c.params["s"], items)


def _chat(c: _Call) -> tuple[int, Any]:
    body = c.json_body()
    query = _text(body, "query")
    if body.get("stream"):
        raise Unprocessable(["body", "stream"], "this test server answers stream=false only")
    target = body.get("target")
    content = c.store.dialectic(c.params["w"], c.params["p"], query or "", target,
                                body.get("session_id"))
    out: dict[str, Any] = {"content": content}
    if body.get("include_evidence"):
        out["evidence"] = {"conclusions": [], "messages": [], "tool_calls": []}
    return 200, out


def _peer_context(c: _Call) -> tuple[int, Any]:
    w, p = c.params["w"], c.params["p"]
    target = c.query.get("target") or p
    rep = c.store.representation(w, p, target, search_query=c.query.get("search_query"),
                                 top_k=c.integer("search_top_k", None))
    return 200, {"peer_id": p, "target_id": target, "representation": rep,
                 "peer_card": c.store.card(w, p, target)}


def _representation(c: _Call) -> tuple[int, Any]:
    body = c.json_body()
    rep = c.store.representation(
        c.params["w"], c.params["p"], body.get("target"), search_query=body.get("search_query"),
        top_k=body.get("search_top_k"), max_conclusions=body.get("max_conclusions"))
    return 200, {"representation": rep}


def _get_card(c: _Call) -> tuple[int, Any]:
    return 200, {"peer_card": c.store.card(c.params["w"], c.params["p"], c.query.get("target"))}


def _put_card(c: _Call) -> tuple[int, Any]:
    card = c.json_body().get("peer_card")
    if not isinstance(card, list) or not all(isinstance(x, str) for x in card):
        raise Unprocessable(["body", "peer_card"], "Input should be a valid list of strings")
    return 200, {"peer_card": c.store.set_card(c.params["w"], c.params["p"], c.query.get("target"),
                                               card)}


def _search_args(c: _Call) -> tuple[str, dict[str, Any] | None, int]:
    body = c.json_body()
    query = _text(body, "query", low=0) or ""
    limit = body.get("limit", 10)
    if not isinstance(limit, int) or not 1 <= limit <= 100:
        raise Unprocessable(["body", "limit"], "Input should be between 1 and 100")
    filters = body.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise Unprocessable(["body", "filters"], "Input should be a valid dictionary")
    return query, filters, limit


def _search(c: _Call) -> tuple[int, Any]:
    query, filters, limit = _search_args(c)
    return 200, c.store.search(c.params["w"], query, filters, limit)


def _peer_search(c: _Call) -> tuple[int, Any]:
    query, filters, limit = _search_args(c)
    c.store.require_peer(c.params["w"], c.params["p"])
    return 200, c.store.search(c.params["w"], query, filters, limit, author=c.params["p"])


def _add_conclusions(c: _Call) -> tuple[int, Any]:
    items = _items(c.json_body(), "conclusions", _CONCLUSION_KEYS,
                   {"content", "observer_id", "observed_id"})
    return 201, c.store.add_conclusions(c.params["w"], items)


def _list_peers(c: _Call) -> tuple[int, Any]:
    page, size = c.integer("page", 1), c.integer("size", 50)
    assert page is not None and size is not None
    return 200, c.store.list_peers(c.params["w"], page, size)


def _list_conclusions(c: _Call) -> tuple[int, Any]:
    body = c.body if isinstance(c.body, dict) else {}
    page, size = c.integer("page", 1), c.integer("size", 50)
    assert page is not None and size is not None
    return 200, c.store.list_conclusions(c.params["w"], body.get("filters"), page, size)


def _query_conclusions(c: _Call) -> tuple[int, Any]:
    body = c.json_body()
    top_k = body.get("top_k", 10)
    if not isinstance(top_k, int) or not 1 <= top_k <= 100:
        raise Unprocessable(["body", "top_k"], "Input should be between 1 and 100")
    return 200, c.store.query_conclusions(c.params["w"], _text(body, "query") or "", top_k,
                                          body.get("filters"))


def _delete_conclusion(c: _Call) -> tuple[int, Any]:
    c.store.delete_conclusion(c.params["w"], c.params["id"])
    return 204, None


def _queue_status(c: _Call) -> tuple[int, Any]:
    c.store.require_workspace(c.params["w"])
    # No deriver runs here, so there is never queued work.
    return 200, {"total_work_units": 0, "completed_work_units": 0, "in_progress_work_units": 0,
                 "pending_work_units": 0, "sessions": {}}


_ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
    (method, re.compile(f"^{pattern}$"), handler) for method, pattern, handler in [
        ("POST", r"/v3/workspaces", _workspace),
        ("POST", _W + r"/peers", _peer),
        ("POST", _W + r"/peers/list", _list_peers),
        ("POST", _W + r"/sessions", _session),
        ("POST", _W + r"/sessions/(?P<s>[^/]+)/peers", _session_peers),
        ("GET", _W + r"/sessions/(?P<s>[^/]+)/peers/(?P<p>[^/]+)/config", _peer_config),
        ("GET", _W + r"/sessions/(?P<s>[^/]+)/context", _context),
        ("POST", _W + r"/sessions/(?P<s>[^/]+)/messages", _add_messages),
        ("POST", _W + r"/sessions/(?P<s>[^/]+)/messages/upload", _upload),
        ("POST", _W + r"/peers/(?P<p>[^/]+)/chat", _chat),
        ("GET", _W + r"/peers/(?P<p>[^/]+)/context", _peer_context),
        ("POST", _W + r"/peers/(?P<p>[^/]+)/representation", _representation),
        ("GET", _W + r"/peers/(?P<p>[^/]+)/card", _get_card),
        ("PUT", _W + r"/peers/(?P<p>[^/]+)/card", _put_card),
        ("POST", _W + r"/search", _search),
        ("POST", _W + r"/peers/(?P<p>[^/]+)/search", _peer_search),
        ("POST", _W + r"/conclusions", _add_conclusions),
        ("POST", _W + r"/conclusions/list", _list_conclusions),
        ("POST", _W + r"/conclusions/query", _query_conclusions),
        ("DELETE", _W + r"/conclusions/(?P<id>[^/]+)", _delete_conclusion),
        ("GET", _W + r"/queue/status", _queue_status),
    ]
]


# ---------------------------------------------------------------------------------- the server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    #: the listen backlog (the standard library\'s 5 resets connections in a burst of clients)
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a timeout, a closed pool) is normal here; anything else is a bug.
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class HonchoTestServer:
    """The server on a background thread. ``db_path`` defaults to a file in a temporary folder.

    Attributes tests use: :attr:`url` (the base URL to give a client), :attr:`store` (the data),
    :attr:`faults` (a list of :class:`Fault`, checked in order), :attr:`latency` (seconds added to
    every answer) and :attr:`requests` (every request, in order).
    """

    def __init__(self, db_path: Path | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, summary_every: int = 20) -> None:
        self._tmp: str | None = None
        if db_path is None:
            self._tmp = tempfile.mkdtemp(prefix="honcho-test-server-")
            db_path = Path(self._tmp) / "honcho.db"
        self.db_path = db_path
        self.store = HonchoStore(db_path, summary_every=summary_every)
        self.api_key = api_key
        self.faults: list[Fault] = []
        self.latency = 0.0
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd = _Server((host, port), _make_handler(self))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> HonchoTestServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="honcho-test-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (the port closes: clients see connection refused) and delete temp data."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self._httpd.server_close()
        self.store.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> HonchoTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fault_for(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(path):
                    fault.hits += 1
                    return fault
        return None

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def requests_to(self, method: str, pattern: str) -> list[RecordedRequest]:
        """Recorded requests with this method whose path matches ``pattern`` (a regex)."""
        with self._lock:
            return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]


def _make_handler(server: HonchoTestServer) -> type[BaseHTTPRequestHandler]:
    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "honcho-test-server"

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes; without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every answer on a kept-alive connection.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            split = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(split.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self.close_connection = True
                self._send(413, {"detail": "Request body too large"})
                return
            raw = self.rfile.read(length) if length else b""
            content_type = self.headers.get("Content-Type") or ""
            body: Any = None
            if raw and "json" in content_type:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = _INVALID  # answered with 422 below
            record = RecordedRequest(method, split.path, query, None if body is _INVALID else body,
                                     headers={"authorization": self.headers.get("Authorization", ""),
                                              "x-honcho-host": self.headers.get("X-Honcho-Host", "")})
            self._record = record  # _send fills in the status before the answer leaves
            server.record(record)
            if server.latency:
                time.sleep(server.latency)
            if split.path.startswith("/_control/"):
                self._control(method, split.path, body)
                return
            fault = server.fault_for(split.path)
            if fault is not None and fault.kind == "drop":
                record.status = -1
                self.close_connection = True
                return  # nothing is written: the client sees the connection close
            if fault is not None and fault.kind == "junk":
                self._send(200, {"unexpected": "this is not a Honcho response"})
                return
            if fault is not None:
                headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after else {}
                self._send(fault.status, {"detail": f"injected failure ({fault.status})"}, headers)
                return
            self._dispatch(method, split.path, query, body, raw, content_type)

        def _authorized(self) -> bool:
            if server.api_key is None:
                return True
            return self.headers.get("Authorization") == f"Bearer {server.api_key}"

        def _dispatch(self, method: str, path: str, query: dict[str, str], body: Any, raw: bytes,
                      content_type: str) -> int:
            if not self._authorized():
                return self._send(401, {"detail": "Invalid or missing API key (Authorization: Bearer)"})
            if body is _INVALID:
                return self._send(422, {"detail": [{"loc": ["body"], "msg": "JSON decode error",
                                                    "type": "json_invalid"}]})
            allowed = False
            for route_method, pattern, handler in _ROUTES:
                match = pattern.match(path)
                if match is None:
                    continue
                allowed = True
                if route_method != method:
                    continue
                call = _Call(server.store, match.groupdict(), query, body, raw, content_type)
                try:
                    status, payload = handler(call)
                except StoreError as exc:
                    return self._send(exc.status, {"detail": exc.detail})
                except sqlite3.ProgrammingError:  # the server is stopping: its database is closed
                    return self._send(503, {"detail": "the server is shutting down"})
                return self._send(status, payload)
            if allowed:
                return self._send(405, {"detail": "Method Not Allowed"})
            return self._send(404, {"detail": "Not Found"})

        def _control(self, method: str, path: str, body: Any) -> int:
            """``POST /_control/faults`` {faults: [...], latency}; ``DELETE`` clears (CLI use)."""
            if path != "/_control/faults" or method not in ("POST", "DELETE"):
                return self._send(404, {"detail": "Not Found"})
            with server._lock:
                if method == "DELETE":
                    server.faults.clear()
                    server.latency = 0.0
                    return self._send(204, None)
                try:
                    faults = [Fault(**f) for f in (body or {}).get("faults", [])]
                    latency = float((body or {}).get("latency", server.latency))
                except (TypeError, ValueError, AttributeError) as exc:
                    return self._send(422, {"detail": f"bad fault description: {exc}"})
                server.faults[:] = faults
                server.latency = latency
            return self._send(200, {"faults": len(faults), "latency": latency})

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> int:
            data = b"" if status == 204 or payload is None else json.dumps(payload).encode()
            record = getattr(self, "_record", None)
            if record is not None:
                record.status = status
            self.send_response(status)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if data:
                self.wfile.write(data)
            return status

    return RequestHandler


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
