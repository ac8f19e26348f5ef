"""The v3 endpoints of the loopback Honcho server (:mod:`.server`): one function per endpoint over
the SQLite store (:mod:`.store`), the request checks that answer 422 the way the real server does,
and the route table the server's handler dispatches through."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

from .store import HonchoStore, Unprocessable, check_id

__all__ = ["ROUTES", "Call", "Handler"]

_W = r"/v3/workspaces/(?P<w>[^/]+)"
_MESSAGE_KEYS = {"content", "peer_id", "metadata", "created_at", "configuration"}
_CONCLUSION_KEYS = {"content", "observer_id", "observed_id", "session_id"}

Handler = Callable[["Call"], tuple[int, Any]]


@dataclass
class Call:
    """One request as an endpoint sees it."""

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


def _text(body: dict[str, Any], key: str, *, low: int = 1, high: int = 10_000) -> str:
    value = body.get(key)
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


def _workspace(c: Call) -> tuple[int, Any]:
    return 200, c.store.workspace(c.json_body())


def _peer(c: Call) -> tuple[int, Any]:
    return 200, c.store.peer(c.params["w"], c.json_body())


def _session(c: Call) -> tuple[int, Any]:
    return 200, c.store.session(c.params["w"], c.json_body())


def _session_peers(c: Call) -> tuple[int, Any]:
    return 200, c.store.add_session_peers(c.params["w"], c.params["s"], c.json_body())


def _peer_config(c: Call) -> tuple[int, Any]:
    return 200, c.store.peer_config(c.params["w"], c.params["s"], c.params["p"])


def _context(c: Call) -> tuple[int, Any]:
    return 200, c.store.context(
        c.params["w"], c.params["s"], tokens=c.integer("tokens", None, 1, 1_000_000),
        peer_target=c.query.get("peer_target"), peer_perspective=c.query.get("peer_perspective"),
        search_query=c.query.get("search_query"), summary=c.flag("summary", True))


def _add_messages(c: Call) -> tuple[int, Any]:
    items = _items(c.json_body(), "messages", _MESSAGE_KEYS, {"content", "peer_id"})
    for i, item in enumerate(items):
        check_id(item["peer_id"], ["body", "messages", i, "peer_id"])
        if item.get("metadata") is not None and not isinstance(item["metadata"], dict):
            raise Unprocessable(["body", "messages", i, "metadata"], "Input should be a valid dictionary")
    return 201, c.store.add_messages(c.params["w"], c.params["s"], items)


def _upload(c: Call) -> tuple[int, Any]:
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


def _chat(c: Call) -> tuple[int, Any]:
    body = c.json_body()
    query = _text(body, "query")
    if body.get("stream"):
        raise Unprocessable(["body", "stream"], "this test server answers stream=false only")
    target = body.get("target")
    content = c.store.dialectic(c.params["w"], c.params["p"], query, target,
                                body.get("session_id"))
    out: dict[str, Any] = {"content": content}
    if body.get("include_evidence"):
        out["evidence"] = {"conclusions": [], "messages": [], "tool_calls": []}
    return 200, out


def _peer_context(c: Call) -> tuple[int, Any]:
    w, p = c.params["w"], c.params["p"]
    target = c.query.get("target") or p
    rep = c.store.representation(w, p, target, search_query=c.query.get("search_query"),
                                 top_k=c.integer("search_top_k", None))
    return 200, {"peer_id": p, "target_id": target, "representation": rep,
                 "peer_card": c.store.card(w, p, target)}


def _representation(c: Call) -> tuple[int, Any]:
    body = c.json_body()
    rep = c.store.representation(
        c.params["w"], c.params["p"], body.get("target"), search_query=body.get("search_query"),
        top_k=body.get("search_top_k"), max_conclusions=body.get("max_conclusions"))
    return 200, {"representation": rep}


def _get_card(c: Call) -> tuple[int, Any]:
    return 200, {"peer_card": c.store.card(c.params["w"], c.params["p"], c.query.get("target"))}


def _put_card(c: Call) -> tuple[int, Any]:
    card = c.json_body().get("peer_card")
    if not isinstance(card, list) or not all(isinstance(x, str) for x in card):
        raise Unprocessable(["body", "peer_card"], "Input should be a valid list of strings")
    return 200, {"peer_card": c.store.set_card(c.params["w"], c.params["p"], c.query.get("target"),
                                               card)}


def _search_args(c: Call) -> tuple[str, dict[str, Any] | None, int]:
    body = c.json_body()
    query = _text(body, "query", low=0)
    limit = body.get("limit", 10)
    if not isinstance(limit, int) or not 1 <= limit <= 100:
        raise Unprocessable(["body", "limit"], "Input should be between 1 and 100")
    filters = body.get("filters")
    if filters is not None and not isinstance(filters, dict):
        raise Unprocessable(["body", "filters"], "Input should be a valid dictionary")
    return query, filters, limit


def _search(c: Call) -> tuple[int, Any]:
    query, filters, limit = _search_args(c)
    return 200, c.store.search(c.params["w"], query, filters, limit)


def _peer_search(c: Call) -> tuple[int, Any]:
    query, filters, limit = _search_args(c)
    c.store.require_peer(c.params["w"], c.params["p"])
    return 200, c.store.search(c.params["w"], query, filters, limit, author=c.params["p"])


def _add_conclusions(c: Call) -> tuple[int, Any]:
    items = _items(c.json_body(), "conclusions", _CONCLUSION_KEYS,
                   {"content", "observer_id", "observed_id"})
    return 201, c.store.add_conclusions(c.params["w"], items)


def _list_peers(c: Call) -> tuple[int, Any]:
    page, size = c.integer("page", 1), c.integer("size", 50)
    assert page is not None and size is not None
    return 200, c.store.list_peers(c.params["w"], page, size)


def _list_conclusions(c: Call) -> tuple[int, Any]:
    body = c.body if isinstance(c.body, dict) else {}
    page, size = c.integer("page", 1), c.integer("size", 50)
    assert page is not None and size is not None
    return 200, c.store.list_conclusions(c.params["w"], body.get("filters"), page, size)


def _query_conclusions(c: Call) -> tuple[int, Any]:
    body = c.json_body()
    top_k = body.get("top_k", 10)
    if not isinstance(top_k, int) or not 1 <= top_k <= 100:
        raise Unprocessable(["body", "top_k"], "Input should be between 1 and 100")
    return 200, c.store.query_conclusions(c.params["w"], _text(body, "query"), top_k,
                                          body.get("filters"))


def _delete_conclusion(c: Call) -> tuple[int, Any]:
    c.store.delete_conclusion(c.params["w"], c.params["id"])
    return 204, None


def _queue_status(c: Call) -> tuple[int, Any]:
    c.store.require_workspace(c.params["w"])
    # No deriver runs here, so there is never queued work.
    return 200, {"total_work_units": 0, "completed_work_units": 0, "in_progress_work_units": 0,
                 "pending_work_units": 0, "sessions": {}}


ROUTES: list[tuple[str, re.Pattern[str], Handler]] = [
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
