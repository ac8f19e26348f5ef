"""A loopback Anthropic Messages API server for tests.

It is a real HTTP server on 127.0.0.1 (``http.server`` on a thread) that speaks ``POST
/v1/messages`` in JSON and, when the request says ``"stream": true``, in server-sent events (and
``POST /v1/messages/count_tokens``, answered with a deterministic count), so the
real anthropic SDK (and anything built on it) can be tested end to end. Only the model's words are
fake: they come from a *script* of canned items or from a callable that sees each request body.

Script items:

* a ``str``: a text answer;
* :class:`Reply`: text and/or tool calls, stop reason, usage, an optional delay (a slow response);
* :class:`Failure`: an HTTP error in the API's error shape (429, 500, 529, ...), optionally slow.

Context management (``context_management`` with its ``anthropic-beta`` headers) is accepted and
applied by a model of the platform's rules (:mod:`hermes_core.testing.context_model`): usage and
``count_tokens`` count what that model keeps, and the reply reports ``applied_edits``.
``Reply(compaction="summary")`` opens the reply with a compaction block;
``refuse_context_management=True`` answers 400 naming the field to any request carrying it.

Every request is recorded (:attr:`MessagesAPIServer.requests`), including those answered with an
error. By default the server also checks the body like the real API does for the mistakes an
adapter can make (missing fields, a tool_result that answers no tool_use of the turn before, more
than four cache_control breakpoints) and answers 400 ``invalid_request_error`` naming the problem.

Example::

    with MessagesAPIServer(["Hello!", Failure(429)]) as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        client.messages.create(model="m", max_tokens=10, messages=[...])
        assert api.requests[0].body["model"] == "m"
"""

from __future__ import annotations

import itertools
import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .context_model import apply_context_management, context_problem, rough_tokens
from .loopback import LoopbackHandler, LoopbackServer, RecordedRequest

__all__ = ["Broken", "Failure", "MessagesAPIServer", "RecordedRequest", "Reply", "ScriptItem"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Reply:
    """A successful answer.

    ``tool_calls`` items are ``{"name": ..., "input": {...}}`` (an ``"id"`` is generated when
    missing). ``Reply()`` with no text and no tool calls is an *empty* answer (``content: []``),
    the case proxies produce and summarisers must treat as a failure. ``delay`` makes it slow.
    """

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    usage: dict[str, int] | None = None
    delay: float = 0.0
    #: how many characters each streamed text delta carries
    chunk_size: int = 16
    #: a server-side compaction: the summary of a ``compaction`` block opening the reply
    compaction: str | None = None


@dataclass
class Failure:
    """An HTTP error answer in the API's error shape.

    ``retry_after_ms`` is sent as the ``retry-after-ms`` header so the SDK's retries wait only that
    long (tests stay fast); ``None`` sends no header (the SDK then uses its own back-off).
    """

    status: int
    message: str = ""
    error_type: str | None = None
    retry_after_ms: int | None = 1
    delay: float = 0.0


@dataclass
class Broken:
    """A transport-level fault instead of an answer.

    ``kind`` is ``"malformed"`` (HTTP 200 whose body is not JSON), ``"reset"`` (the connection is
    reset, with no answer at all) or ``"truncated"`` (HTTP 200 whose body stops half-way and the
    connection closes). ``delay`` waits first.
    """

    kind: str = "reset"
    delay: float = 0.0


ScriptItem = str | Reply | Failure | Broken
Responder = Callable[[dict[str, Any]], ScriptItem]


class MessagesAPIServer(LoopbackServer):
    """The server; use it as a context manager (or call :meth:`start` / :meth:`stop`)."""

    #: the path answered with model replies (a subclass speaking another API changes both)
    endpoint = "/v1/messages"

    def __init__(
        self,
        script: Iterable[ScriptItem] | Responder = (),
        *,
        default: ScriptItem | None = None,
        validate: bool = True,
        model: str = "claude-test",
        refuse_context_management: bool = False,
    ) -> None:
        super().__init__()
        self._responder: Responder | None = script if callable(script) else None
        self._script: deque[ScriptItem] = deque() if callable(script) else deque(script)
        self.default = default
        self.validate = validate
        self.model = model
        #: answer 400 naming ``context_management`` to any request carrying it
        self.refuse_context_management = refuse_context_management
        self._ids = itertools.count(1)

    # --------------------------------------------------------------------------------- script

    def enqueue(self, *items: ScriptItem) -> None:
        """Add answers to the end of the script."""
        with self._lock:
            self._script.extend(items)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of every request to :attr:`endpoint`, in arrival order."""
        return [r.body for r in self.requests if r.path == self.endpoint and r.body is not None]

    def _next_item(self, body: dict[str, Any]) -> ScriptItem:
        if self._responder is not None:
            return self._responder(body)
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.default is not None:
            return self.default
        return Failure(
            500,
            "MessagesAPIServer: the script is exhausted; enqueue more answers or pass default=",
            retry_after_ms=None,
        )

    def _message_id(self) -> str:
        return f"msg_test_{next(self._ids):06d}"


def _envelope(body: Any, required: tuple[str, ...], counts: tuple[str, ...], missing: str
              ) -> str | None:
    """What is wrong with the envelope of a chat request: not an object, a ``required`` field
    absent (``missing`` formatted with its name), one of ``counts`` not a positive integer, or no
    message."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    for key in required:
        if key not in body:
            return missing.format(key)
    for key in counts:
        if key in body and (not isinstance(body[key], int) or body[key] < 1):
            return f"{key}: must be a positive integer"
    if not isinstance(body["messages"], list) or not body["messages"]:
        return "messages: at least one message is required"
    return None


def _problem(body: Any) -> str | None:
    """What the real API would reject in ``body``, or ``None``."""
    problem = _envelope(body, ("model", "max_tokens", "messages"), ("max_tokens",),
                        "{}: Field required")
    if problem is not None:
        return problem
    messages = body["messages"]
    system = body.get("system")
    breakpoints = _breakpoints(system) if isinstance(system, list) else 0
    previous_tool_uses: set[str] = set()
    for i, msg in enumerate(messages):
        problem = _message_problem(i, msg, previous_tool_uses)
        if problem is not None:
            return problem
        breakpoints += _breakpoints(_blocks(msg))
        previous_tool_uses = _tool_use_ids(msg) if msg["role"] == "assistant" else set()
    if breakpoints > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
    return None


def _blocks(msg: dict[str, Any]) -> Any:
    """A message's content as a list of blocks (a string is one text block)."""
    content = msg.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _breakpoints(blocks: list[Any]) -> int:
    """How many of ``blocks`` carry ``cache_control``."""
    return sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)


def _tool_use_ids(msg: dict[str, Any]) -> set[str]:
    return {str(b.get("id")) for b in _blocks(msg) if b.get("type") == "tool_use"}


def _message_problem(i: int, msg: Any, previous_tool_uses: set[str]) -> str | None:
    """What is wrong with message ``i``; its tool results must answer ``previous_tool_uses``."""
    if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
        return f"messages.{i}.role: must be 'user' or 'assistant'"
    blocks = _blocks(msg)
    if not isinstance(blocks, list):
        return f"messages.{i}.content: must be a string or a list of blocks"
    for j, block in enumerate(blocks):
        if not isinstance(block, dict):
            return f"messages.{i}.content.{j}: must be an object"
        kind = block.get("type")
        if kind == "text" and not block.get("text"):
            return f"messages.{i}.content.{j}: text content blocks must be non-empty"
        if kind == "tool_result" and block.get("tool_use_id") not in previous_tool_uses:
            return (
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                "blocks: each tool_result must answer a tool_use of the previous message"
            )
    return None


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    if reply.usage is not None:
        return {"input_tokens": 0, "output_tokens": 0, **reply.usage}
    # a rough, deterministic count of what the model reads (after context management): enough
    # for code that reads usage, not a tokenizer
    read, _applied = apply_context_management(body)
    produced = len(reply.text) + sum(len(json.dumps(c.get("input", {}))) for c in reply.tool_calls)
    return {"input_tokens": rough_tokens(read), "output_tokens": max(1, produced // 4)}


class _Handler(LoopbackHandler):
    api: MessagesAPIServer

    def do_GET(self) -> None:
        self.record(None)
        self._send_json(404, self._error_body(404, f"no route for GET {self.path}"))

    def do_POST(self) -> None:
        body = self._read_json()
        path = self.record(body).path
        if path == "/v1/messages/count_tokens":
            self._count_tokens(body)
            return
        if path != self.api.endpoint:
            self._send_json(404, self._error_body(404, f"no route for POST {path}"))
            return
        problem = self._problem(body) if self.api.validate else None
        if problem is None:
            problem = self._context_problem(body)
        if problem is not None or body is None:
            self._send_json(400, self._error_body(400, problem or "the body is not valid JSON"))
            return
        self._answer(body)

    def _read_json(self) -> Any:
        """The request's JSON body, or ``None`` when it is empty or not JSON."""
        raw = self.read_body()
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def _context_problem(self, body: Any) -> str | None:
        """What is wrong with the body's ``context_management``, if it has one."""
        if not isinstance(body, dict) or "context_management" not in body:
            return None
        if self.api.refuse_context_management:
            return "context_management: Extra inputs are not permitted"
        return context_problem(body, self.headers.get("anthropic-beta") or "")

    def _answer(self, body: dict[str, Any]) -> None:
        """Answer a valid request with the script's next item."""
        item = self.api._next_item(body)
        if isinstance(item, str):
            item = Reply(text=item)
        if not self.api.wait(item.delay):
            self.drop()  # stopping: answer nothing
            return
        if isinstance(item, Broken):
            self._break(item.kind)
            return
        if isinstance(item, Failure):
            self._fail(item)
            return
        if body.get("stream"):
            self._stream(body, item)
        else:
            self._send_json(200, self._message(body, item))

    def _fail(self, item: Failure) -> None:
        headers = {}
        if item.retry_after_ms is not None:
            headers["retry-after-ms"] = str(item.retry_after_ms)
        message = item.message or f"simulated HTTP {item.status}"
        self._send_json(item.status, self._error_body(item.status, message, item.error_type),
                        headers)

    def _problem(self, body: Any) -> str | None:
        return _problem(body)

    def _error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        return _error_body(status, message, error_type)

    # ------------------------------------------------------------------------------- helpers

    def _count_tokens(self, body: dict[str, Any] | None) -> None:
        """``POST /v1/messages/count_tokens``: the body of a request without ``max_tokens``,
        answered with ``{"input_tokens": N}``, N the same rough deterministic count as a reply's
        usage (plus the tools' size)."""
        if not isinstance(body, dict):
            what = "not valid JSON" if body is None else f"a JSON {type(body).__name__}"
            self._send_json(400, _error_body(400, f"the body is {what}; send a JSON object"))
            return
        problem = _problem({**body, "max_tokens": 1}) or self._context_problem(body)
        if problem is not None:
            self._send_json(400, _error_body(400, problem))
            return
        tools = len(json.dumps(body.get("tools", []))) // 4 if body.get("tools") else 0
        answer: dict[str, Any] = {"input_tokens": _usage(body, Reply(text=""))["input_tokens"] + tools}
        if "context_management" in body:
            answer["context_management"] = {"original_input_tokens": rough_tokens(body) + tools}
        self._send_json(200, answer)

    def _break(self, kind: str) -> None:
        self.drop(reset=kind == "reset")
        if kind == "reset":
            return
        payload = b'{"id": "msg_broken", "type": "message", "content": [{"type": "te'
        if kind == "malformed":
            payload = b"<html><body>502 Bad Gateway from a proxy</body></html>"
            length = len(payload)
        elif kind == "truncated":
            length = len(payload) * 3
        else:
            raise ValueError(f"unknown Broken kind {kind!r}: use malformed, reset or truncated")
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(length))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _content(self, reply: Reply) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if reply.compaction is not None:
            content.append({"type": "compaction", "content": reply.compaction,
                            "encrypted_content": "opaque-test-state"})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for n, call in enumerate(reply.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": call.get("id") or f"toolu_test_{next(self.api._ids):06d}_{n}",
                    "name": call["name"],
                    "input": call.get("input", {}),
                }
            )
        return content

    def _stop_reason(self, reply: Reply) -> str:
        return reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")

    def _message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message = {
            "id": self.api._message_id(),
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or self.api.model,
            "content": self._content(reply),
            "stop_reason": self._stop_reason(reply),
            "stop_sequence": None,
            "usage": _usage(body, reply),
        }
        if "context_management" in body:
            message["context_management"] = {"applied_edits": apply_context_management(body)[1]}
        return message

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self.send_json(status, payload,
                       {"request-id": f"req_test_{next(self.api._ids):06d}", **(headers or {})})

    def _open_stream(self) -> None:
        """Answer 200 with server-sent events to follow; the connection closes after them."""
        if self.current is not None:
            self.current.status = 200
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        self._open_stream()
        usage = _usage(body, reply)
        start = self._message(body, reply)
        start.update(content=[], stop_reason=None, usage={**usage, "output_tokens": 1})
        events = [_event("message_start", message=start), _event("ping")]
        for index, block in enumerate(self._content(reply)):
            if block["type"] == "compaction":
                opening: dict[str, Any] = {"type": "compaction", "content": None}
                deltas = [{"type": "compaction_delta", "content": block["content"],
                           "encrypted_content": block["encrypted_content"]}]
            elif block["type"] == "text":
                opening, size = {"type": "text", "text": ""}, max(1, reply.chunk_size)
                deltas = [{"type": "text_delta", "text": block["text"][pos : pos + size]}
                          for pos in range(0, len(block["text"]), size)]
            else:
                opening = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
            events.append(_event("content_block_start", index=index, content_block=opening))
            events += [_event("content_block_delta", index=index, delta=d) for d in deltas]
            events.append(_event("content_block_stop", index=index))
        events.append(_event("message_delta", delta={"stop_reason": self._stop_reason(reply),
                                                     "stop_sequence": None},
                             usage={"output_tokens": usage["output_tokens"]}))
        events.append(_event("message_stop"))
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


MessagesAPIServer.handler = _Handler


def _event(name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """A server-sent event: its name, and its data (whose ``type`` is the name)."""
    return name, {"type": name, **fields}


def _error_body(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    kind = error_type or _ERROR_TYPES.get(status) or ("api_error" if status >= 500 else "error")
    return {"type": "error", "error": {"type": kind, "message": message}}
