"""Fixtures for the fast tests: an in-memory stand-in of the Hindsight API behind httpx.MockTransport.

The stand-in answers the five endpoints the plugin uses with the real server's shapes (recorded from
hindsight-api 1.1.0) and keeps what it is sent, so tests can assert on the exact requests. Its recall
is a plain word-overlap ranking: these tests check the plugin's plumbing; recall *quality* is
checked against the real server in tests/integration.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hermes_core_hindsight import HindsightClient, HindsightMemory

from hermes_core.testing import make_instance

_WORDS = re.compile(r"\w+")


class FakeHindsight:
    """A callable for httpx.MockTransport; set the attributes to change its behaviour."""

    def __init__(self, *, version: str = "1.1.0", observations: bool = False) -> None:
        self.version = version
        self.observations = observations
        self.requests: list[tuple[str, str, dict[str, Any] | None, dict[str, str]]] = []
        self.memories: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        #: seconds to wait before answering (a slow server)
        self.delay = 0.0
        #: raise httpx.ConnectError for every request (the server is down)
        self.down = False
        #: answer this status for retains (e.g. 503, 422)
        self.retain_status: int | None = None
        self.llm = True
        self.release = threading.Event()
        self.release.set()
        #: operation id -> the statuses ``GET /operations/{id}`` answers next (the last repeats);
        #: an async retain's operation starts as ["processing", "completed"]
        self.operations: dict[str, list[str]] = {}
        #: whether stored memories are found only once their operation completed (as on the server)
        self.index_on_completion = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        self.release.wait(10)
        if self.delay:
            threading.Event().wait(self.delay)
        body = json.loads(request.content) if request.content else None
        with self.lock:
            self.requests.append((request.method, request.url.path, body, dict(request.headers)))
        path = request.url.path
        if path == "/version":
            return httpx.Response(200, json={"api_version": self.version,
                                             "features": {"observations": self.observations}})
        if path == "/health":
            return httpx.Response(200, json={"status": "healthy", "database": "connected"})
        if path == "/v1/default/banks" and request.method == "GET":  # one page, as the server does
            q = request.url.params.get("q") or ""
            limit = int(request.url.params.get("limit", 100))
            offset = int(request.url.params.get("offset", 0))
            with self.lock:
                ids = sorted({m["bank"] for m in self.memories if q.lower() in m["bank"].lower()})
            return httpx.Response(200, json={
                "banks": [{"bank_id": b, "name": None, "disposition": {}} for b in
                          ids[offset:offset + limit]],
                "total": len(ids), "limit": limit, "offset": offset})
        op = re.fullmatch(r"/v1/default/banks/([^/]+)/operations/([^/]+)", path)
        if op is not None:
            with self.lock:
                queue = self.operations.get(op.group(2))
                if queue is None:
                    return httpx.Response(404, json={"detail": "Operation not found"})
                status = queue.pop(0) if len(queue) > 1 else queue[0]
            return httpx.Response(200, json={"operation_id": op.group(2), "status": status,
                                             "error_message": None})
        match = re.fullmatch(r"/v1/default/banks/([^/]+)/(memories|memories/recall|reflect|operations)",
                             path)
        if match is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        bank, route = match.groups()
        if route == "memories":
            if self.retain_status is not None:
                return httpx.Response(self.retain_status, json={"detail": "retain refused"})
            answer: dict[str, Any] = {"success": True, "bank_id": bank,
                                      "items_count": len(body["items"]),
                                      "async": body.get("async", False)}
            op_id = body.get("operation_id") or str(uuid.uuid4())
            with self.lock:
                for item in body["items"]:
                    self.memories.append({**item, "bank": bank, "id": str(uuid.uuid4()),
                                          "operation": op_id})
                if body.get("async"):
                    self.operations.setdefault(op_id, ["processing", "completed"])
                    answer["operation_id"] = op_id
            return httpx.Response(200, json=answer)
        if route == "memories/recall":
            return httpx.Response(200, json={"results": self._recall(bank, body)})
        if route == "operations":
            return httpx.Response(200, json={"bank_id": bank, "total": 0, "operations": []})
        if not self.llm:
            return httpx.Response(400, json={"detail": "Reflect requires an LLM provider. Set "
                                                       "HINDSIGHT_API_LLM_PROVIDER."})
        return httpx.Response(200, json={"text": f"reflected on {body['query']}"})

    def _recall(self, bank: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        query = set(_WORDS.findall(body["query"].lower()))
        scored = []
        with self.lock:
            for m in self.memories:
                if m["bank"] != bank:
                    continue
                if self.index_on_completion and self.operations.get(
                        m.get("operation", ""), ["completed"])[0] != "completed":
                    continue
                overlap = len(query & set(_WORDS.findall(str(m["content"]).lower())))
                if overlap:
                    scored.append((overlap, m))
        scored.sort(key=lambda pair: -pair[0])
        return [{"id": m["id"], "text": m["content"], "type": "world",
                 "document_id": m.get("document_id"), "tags": m.get("tags", []),
                 "mentioned_at": "2026-01-02T03:04:05+00:00",
                 "scores": {"final": float(score)}} for score, m in scored]

    def calls(self, route: str) -> list[dict[str, Any] | None]:
        """Bodies of the requests whose path ends with ``route``."""
        with self.lock:
            return [body for _m, path, body, _h in self.requests if path.endswith(route)]


@pytest.fixture
def fake() -> FakeHindsight:
    return FakeHindsight()


def build_provider(home: Path, fake: FakeHindsight, config: str = "") -> HindsightMemory:
    """A provider built as the kernel builds it, talking to ``fake`` through MockTransport.

    The stand-in transport is in place while the provider is built: a provider that finds a
    spool left by an earlier one starts sending it from its constructor, and that send must reach
    ``fake`` (swapping the client afterwards raced it: the send could go to the configured URL)."""
    from hermes_core_hindsight import provider as provider_module

    def client_of_fake(*args: Any, **kwargs: Any) -> HindsightClient:
        return HindsightClient(*args, transport=httpx.MockTransport(fake), **kwargs)

    saved = provider_module.HindsightClient
    provider_module.HindsightClient = client_of_fake  # type: ignore[assignment,misc]
    try:
        instance = make_instance(HindsightMemory, "memory-provider", home,
                                 config=config or "hindsight:\n  bank: unit\n")
    finally:
        provider_module.HindsightClient = saved  # type: ignore[misc]
    assert isinstance(instance, HindsightMemory)
    return instance


@pytest.fixture
def provider(hermes_home: Path, fake: FakeHindsight) -> Iterator[HindsightMemory]:
    instance = build_provider(hermes_home, fake)
    yield instance
    instance.shutdown()
