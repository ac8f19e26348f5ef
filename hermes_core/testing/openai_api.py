"""A loopback OpenAI-compatible Chat Completions server for tests.

The sibling of :mod:`hermes_core.testing.messages_api`, with the same lifecycle, script items and
request log, speaking ``POST /v1/chat/completions`` (JSON, or server-sent ``chat.completion.chunk``
events when the request says ``"stream": true``) and ``GET /v1/models``, so the real ``openai`` SDK
can be tested end to end on 127.0.0.1. Only the model's words are fake.

Script items are those of the Messages API server, read the Chat Completions way:

* a ``str``, or :class:`~hermes_core.testing.messages_api.Reply`: ``text`` is the message content;
  ``tool_calls`` items are ``{"name": ..., "input": {...}}`` (sent as JSON text), or
  ``{"name": ..., "arguments": "<raw text>"}`` to send arguments verbatim (broken JSON included);
  ``stop_reason`` is sent as ``finish_reason`` verbatim (default ``tool_calls`` or ``stop``), so
  an unknown one can be scripted; ``usage``, when given, is the response's ``usage`` object as is
  (``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``);
  ``chunk_size`` is the characters per streamed delta, for text and arguments alike;
* :class:`~hermes_core.testing.messages_api.Failure`: an HTTP error in OpenAI's error shape;
* :class:`~hermes_core.testing.messages_api.Broken`: a transport fault.

So one script drives both servers: a conversation replayed on each gives the same tool calls.

Server options: ``max_model_len`` adds vLLM's field of that name to the model listing (omitted by
default, as OpenAI, Ollama and others do); ``tools_supported=False`` answers any request with
``tools`` HTTP 400 "<model> does not support tools", as Ollama does for such models.

Example::

    with OpenAIAPIServer(["Hello!"]) as api:
        client = openai.OpenAI(api_key="test", base_url=api.base_url, max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert api.bodies[0]["model"] == "m"
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .messages_api import MessagesAPIServer, Reply, Responder, ScriptItem, _envelope, _Handler

__all__ = ["OpenAIAPIServer"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}
_ERROR_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
_ROLES = ("system", "developer", "user", "assistant", "tool")


class OpenAIAPIServer(MessagesAPIServer):
    """The server; use it as a context manager (or call :meth:`start` / :meth:`stop`)."""

    endpoint = "/v1/chat/completions"

    def __init__(
        self,
        script: Iterable[ScriptItem] | Responder = (),
        *,
        default: ScriptItem | None = None,
        validate: bool = True,
        model: str = "gpt-test",
        max_model_len: int | None = None,
        tools_supported: bool = True,
    ) -> None:
        super().__init__(script, default=default, validate=validate, model=model)
        self.max_model_len = max_model_len
        self.tools_supported = tools_supported

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as ``base_url`` (it ends in ``/v1``, as OpenAI's does)."""
        return f"http://127.0.0.1:{self.port}/v1"


def _problem(body: Any, api: OpenAIAPIServer) -> str | None:
    """What a strict Chat Completions server would reject in ``body``, or ``None``."""
    return (_envelope(body, ("model", "messages"), ("max_tokens", "max_completion_tokens"),
                      "'{}' is a required property")
            or _messages_problem(body["messages"]) or _tools_problem(body, api))


def _messages_problem(messages: list[Any]) -> str | None:
    """The roles, contents and tool-call pairing of ``messages``, in order."""
    open_calls: set[str] = set()
    for i, msg in enumerate(messages):
        problem = _message_problem(i, msg, open_calls)
        if problem is not None:
            return problem
    return None


def _message_problem(i: int, msg: Any, open_calls: set[str]) -> str | None:
    """Check message ``i``; ``open_calls`` (the tool calls not answered yet) is updated in place."""
    if not isinstance(msg, dict) or msg.get("role") not in _ROLES:
        return f"messages[{i}].role: must be one of {', '.join(_ROLES)}"
    role = msg["role"]
    if role == "tool":
        if msg.get("tool_call_id") not in open_calls:
            return (f"messages[{i}]: a message with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls' (unknown tool_call_id "
                    f"{msg.get('tool_call_id')!r})")
        open_calls.discard(msg["tool_call_id"])
        return None
    if open_calls:
        return (f"messages[{i}]: an assistant message with 'tool_calls' must be followed by "
                f"tool messages responding to each 'tool_call_id' (missing: "
                f"{', '.join(sorted(open_calls))})")
    calls = msg.get("tool_calls")
    if role == "assistant" and calls:
        return _tool_calls_problem(i, calls, open_calls)
    if not isinstance(msg.get("content"), str) and not isinstance(msg.get("content"), list):
        return f"messages[{i}].content: must be a string or a list of parts"
    return None


def _tool_calls_problem(i: int, calls: Any, open_calls: set[str]) -> str | None:
    """Check the ``tool_calls`` of assistant message ``i``, adding their ids to ``open_calls``."""
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (not isinstance(function, dict) or call.get("type") != "function"
                or not call.get("id") or not function.get("name")
                or not isinstance(function.get("arguments"), str)):
            return (f"messages[{i}].tool_calls[{j}]: needs id, type 'function' and "
                    "function.name / function.arguments (a string)")
        open_calls.add(str(call["id"]))
    return None


def _tools_problem(body: dict[str, Any], api: OpenAIAPIServer) -> str | None:
    """The request's ``tools``: refused by a server without tool support, else each a function."""
    tools = body.get("tools")
    if not tools:
        return None
    if not api.tools_supported:
        return f"{body['model']} does not support tools"
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type") != "function" or not (
                isinstance(tool.get("function"), dict) and tool["function"].get("name")):
            return f"tools[{k}]: must be {{'type': 'function', 'function': {{'name': ...}}}}"
    return None


def _arguments(call: dict[str, Any]) -> str:
    if "arguments" in call:
        return str(call["arguments"])
    return json.dumps(call.get("input", {}))


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    if reply.usage is not None:
        return dict(reply.usage)
    # a rough, deterministic count: enough for code that reads usage, not a tokenizer
    prompt = max(1, len(json.dumps(body.get("messages", []))) // 4)
    produced = len(reply.text) + sum(len(_arguments(c)) for c in reply.tool_calls)
    completion = max(1, produced // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class _OpenAIHandler(_Handler):
    api: OpenAIAPIServer

    def do_GET(self) -> None:
        if self.record(None).path != "/v1/models":
            self._send_json(404, self._error_body(404, f"no route for GET {self.path}"))
            return
        entry: dict[str, Any] = {"id": self.api.model, "object": "model", "created": 0,
                                 "owned_by": "hermes-core-test"}
        if self.api.max_model_len is not None:
            entry["max_model_len"] = self.api.max_model_len
        self._send_json(200, {"object": "list", "data": [entry]})

    def _problem(self, body: Any) -> str | None:
        return _problem(body, self.api)

    def _error_body(self, status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
        kind = error_type or _ERROR_TYPES.get(status) or ("server_error" if status >= 500 else "error")
        return {"error": {"message": message, "type": kind, "param": None,
                          "code": _ERROR_CODES.get(status)}}

    def _calls(self, reply: Reply) -> list[dict[str, Any]]:
        return [{"id": call.get("id") or f"call_test_{next(self.api._ids):06d}_{n}",
                 "type": "function",
                 "function": {"name": call["name"], "arguments": _arguments(call)}}
                for n, call in enumerate(reply.tool_calls)]

    def _finish(self, reply: Reply) -> str:
        return reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = self._calls(reply)
        return {
            "id": f"chatcmpl-test-{next(self.api._ids):06d}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model") or self.api.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish(reply),
                         "logprobs": None}],
            "usage": _usage(body, reply),
        }

    def _stream(self, body: dict[str, Any], reply: Reply) -> None:
        self._open_stream()
        base = {"id": f"chatcmpl-test-{next(self.api._ids):06d}", "object": "chat.completion.chunk",
                "created": 0, "model": body.get("model") or self.api.model}
        size = max(1, reply.chunk_size)
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": reply.text[p:p + size]} for p in range(0, len(reply.text), size)]
        calls = self._calls(reply)
        # every call opens with its id and name, then the argument pieces of all calls arrive
        # interleaved (index says which call a piece belongs to)
        for index, call in enumerate(calls):
            deltas.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                           "function": {"name": call["function"]["name"],
                                                        "arguments": ""}}]})
        pieces = [[(i, c["function"]["arguments"][p:p + size])
                   for p in range(0, len(c["function"]["arguments"]), size)]
                  for i, c in enumerate(calls)]
        for row in range(max((len(p) for p in pieces), default=0)):
            for per_call in pieces:
                if row < len(per_call):
                    index, text = per_call[row]
                    deltas.append({"tool_calls": [{"index": index, "function": {"arguments": text}}]})
        chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
                  for d in deltas]
        chunks.append({**base, "choices": [{"index": 0, "delta": {},
                                            "finish_reason": self._finish(reply)}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": _usage(body, reply)})
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


OpenAIAPIServer.handler = _OpenAIHandler
