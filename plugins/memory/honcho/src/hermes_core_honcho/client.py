"""A small synchronous client of the Honcho v3 API (httpx), for the calls this provider makes.

Why not the ``honcho-ai`` SDK at run time: the provider needs exact control of timeouts and retries
(a write is retried once, on the provider's own lane; a read is never retried, the next turn
refreshes anyway; a tool gets one attempt under its own timeout), and the SDK retries twice with
its own back-off and issues a get-or-create request whenever a peer or session object is built.
The wire format is the SDK's: the tests run the SDK against the same loopback server and replay
this client's request bodies through the SDK's request models.

Every answer is validated (pydantic, unknown fields ignored, as newer servers add fields); an
answer that is not Honcho's raises :class:`HonchoProtocolError` naming the endpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from hermes_core.errors import HermesCoreError

from ._version import __version__

__all__ = [
    "CardOut",
    "ConclusionOut",
    "HonchoClient",
    "HonchoError",
    "HonchoProtocolError",
    "HonchoRejected",
    "HonchoUnavailable",
    "MessageOut",
    "SessionContextOut",
]

class HonchoError(HermesCoreError):
    """A Honcho request failed; the message says which, where and why."""


class HonchoUnavailable(HonchoError):
    """Worth retrying later: connection refused or dropped, a timeout, 429 or a 5xx answer."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HonchoRejected(HonchoError):
    """The server refused the request (a 4xx other than 429): sending it again will not help."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class HonchoProtocolError(HonchoError):
    """The answer is not what a Honcho server sends (wrong shape, not JSON)."""


_Item = TypeVar("_Item")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MessageOut(_Wire):
    id: str
    content: str
    peer_id: str
    session_id: str
    created_at: str
    metadata: dict[str, Any] = {}


class SummaryOut(_Wire):
    content: str
    summary_type: str = "short"


class SessionContextOut(_Wire):
    id: str
    messages: list[MessageOut]
    summary: SummaryOut | None = None
    peer_representation: str | None = None
    peer_card: list[str] | None = None


class ConclusionOut(_Wire):
    id: str
    content: str
    observer_id: str
    observed_id: str
    session_id: str | None = None
    created_at: str


class _IdOut(_Wire):
    id: str


class _Page(_Wire, Generic[_Item]):
    items: list[_Item]
    total: int
    page: int
    size: int
    pages: int


PageOut = _Page[ConclusionOut]
PeerPageOut = _Page[_IdOut]


class CardOut(_Wire):
    peer_card: list[str] | None  # required: the key is always there, null when there is no card


class _ChatOut(_Wire):
    content: str | None


class _RepresentationOut(_Wire):
    representation: str


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if not (isinstance(body, dict) and "detail" in body):  # not FastAPI's: shown as it came
        return response.text[:500]
    detail = body["detail"]
    if isinstance(detail, list):  # FastAPI validation errors
        return "; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}" if isinstance(d, dict)
            else str(d) for d in detail
        )
    return str(detail)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class HonchoClient:
    """One workspace of one Honcho server. Thread-safe (httpx.Client is)."""

    def __init__(self, base_url: str, *, workspace: str, api_key: str | None = None,
                 timeout: float = 10.0, transport: httpx.BaseTransport | None = None) -> None:
        headers = {"X-Honcho-Host": f"hermes-core-honcho/{__version__}"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self.workspace = workspace
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                  transport=transport)

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------------------- transport

    def _w(self, suffix: str) -> str:
        return f"/v3/workspaces/{self.workspace}{suffix}"

    def request(self, method: str, path: str, *, json: Any = None,
                params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Send one request (no retry); return the decoded JSON body (``None`` for 204)."""
        where = f"{method} {path}"
        clean = {k: v for k, v in (params or {}).items() if v is not None} or None
        timeout = self.timeout if timeout is None else timeout
        try:
            response = self._http.request(method, path, json=json, params=clean, timeout=timeout)
        except httpx.TimeoutException:
            raise HonchoUnavailable(
                f"Honcho at {self.base_url} did not answer {where} within {timeout:g} s") from None
        except httpx.TransportError as exc:
            raise HonchoUnavailable(
                f"cannot reach Honcho at {self.base_url} ({where}): {type(exc).__name__}: {exc}"
            ) from None
        status = response.status_code
        if status == 429 or status >= 500:
            raise HonchoUnavailable(
                f"Honcho at {self.base_url} answered {where} with {status}: {_detail(response)}",
                retry_after=_retry_after(response))
        if status in (401, 403):
            raise HonchoRejected(
                f"Honcho at {self.base_url} refused the API key ({status} on {where}): "
                f"{_detail(response)}. Check HONCHO_API_KEY / honcho.api_key", status=status)
        if status >= 400:
            raise HonchoRejected(
                f"Honcho at {self.base_url} rejected {where} ({status}): {_detail(response)}",
                status=status)
        if status == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise HonchoProtocolError(
                f"Honcho at {self.base_url} answered {where} with {status} and a body that is not "
                f"JSON: {response.text[:120]!r}; is honcho.base_url a Honcho server?") from None

    def _parse(self, model: Any, data: Any, where: str) -> Any:
        adapter = _ADAPTERS.get(model)
        if adapter is None:  # building an adapter costs more than using one
            adapter = _ADAPTERS[model] = TypeAdapter(model)
        try:
            return adapter.validate_python(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise HonchoProtocolError(
                f"Honcho at {self.base_url} answered {where} with something that is not a Honcho "
                f"response ({'.'.join(str(p) for p in first['loc']) or 'body'}: {first['msg']}); "
                "is honcho.base_url a Honcho v3 server?") from None

    def _call(self, model: Any, method: str, path: str, **kwargs: Any) -> Any:
        return self._parse(model, self.request(method, path, **kwargs), f"{method} {path}")

    # ------------------------------------------------------------------------ get-or-create

    def ensure_workspace(self) -> None:
        self._call(_IdOut, "POST", "/v3/workspaces", json={"id": self.workspace})

    def ensure_peer(self, peer_id: str, metadata: dict[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"id": peer_id}
        if metadata:
            body["metadata"] = metadata
        self._call(_IdOut, "POST", self._w("/peers"), json=body)

    def list_peers(self, *, page: int = 1, size: int = 100,
                   timeout: float | None = None) -> PeerPageOut:
        """One page of the workspace's peers (``POST W/peers/list``)."""
        out: PeerPageOut = self._call(PeerPageOut, "POST", self._w("/peers/list"),
                                      params={"page": page, "size": size}, json={},
                                      timeout=timeout)
        return out

    def peer_ids(self, *, size: int = 100, max_pages: int = 1000) -> list[str]:
        """Every peer id of the workspace, page by page (at most ``max_pages`` pages)."""
        ids: list[str] = []
        page = 1
        while page <= max_pages:
            out = self.list_peers(page=page, size=size)
            ids.extend(p.id for p in out.items)
            if page >= out.pages or not out.items:
                break
            page += 1
        return ids

    def ensure_session(self, session_id: str, *, metadata: dict[str, Any],
                       peers: dict[str, dict[str, bool]]) -> None:
        self._call(_IdOut, "POST", self._w("/sessions"),
                   json={"id": session_id, "metadata": metadata, "peers": peers})

    # ---------------------------------------------------------------------------- messages

    def add_messages(self, session_id: str, messages: list[dict[str, Any]]) -> list[MessageOut]:
        """Store 1-100 messages ``{content, peer_id, metadata?, created_at?}`` (answer: 201)."""
        out: list[MessageOut] = self._call(list[MessageOut], "POST",
                                           self._w(f"/sessions/{session_id}/messages"),
                                           json={"messages": messages})
        return out

    def session_context(self, session_id: str, *, peer_target: str | None = None,
                        peer_perspective: str | None = None, search_query: str | None = None,
                        tokens: int | None = None, timeout: float | None = None) -> SessionContextOut:
        out: SessionContextOut = self._call(
            SessionContextOut, "GET", self._w(f"/sessions/{session_id}/context"),
            params={"summary": "true", "limit_to_session": "false", "tokens": tokens,
                    "peer_target": peer_target, "peer_perspective": peer_perspective,
                    "search_query": search_query[:500] if search_query else None},
            timeout=timeout)
        return out

    def search(self, query: str, *, limit: int, peer: str | None = None,
               filters: dict[str, Any] | None = None, timeout: float | None = None) -> list[MessageOut]:
        """Messages ranked by relevance: workspace-wide, or those ``peer`` wrote."""
        path = self._w(f"/peers/{peer}/search") if peer else self._w("/search")
        out: list[MessageOut] = self._call(list[MessageOut], "POST", path,
                                           json={"query": query, "filters": filters, "limit": limit},
                                           timeout=timeout)
        return out

    # ------------------------------------------------------------------------------ peers

    def chat(self, observer: str, query: str, *, target: str | None = None,
             session_id: str | None = None, reasoning_level: str = "low",
             timeout: float | None = None) -> str | None:
        """The dialectic: ``observer``'s answer about ``target`` (``None``: nothing to say)."""
        body: dict[str, Any] = {"query": query[:10_000], "stream": False,
                                "reasoning_level": reasoning_level}
        if target:
            body["target"] = target
        if session_id:
            body["session_id"] = session_id
        out: _ChatOut = self._call(_ChatOut, "POST", self._w(f"/peers/{observer}/chat"), json=body,
                                   timeout=timeout)
        return out.content

    def representation(self, observer: str, *, target: str | None = None,
                       search_query: str | None = None, timeout: float | None = None) -> str:
        body = {k: v for k, v in {"target": target, "search_query": search_query}.items() if v}
        out: _RepresentationOut = self._call(_RepresentationOut, "POST",
                                             self._w(f"/peers/{observer}/representation"),
                                             json=body, timeout=timeout)
        return out.representation

    def get_card(self, observer: str, *, target: str | None = None,
                 timeout: float | None = None) -> list[str] | None:
        out: CardOut = self._call(CardOut, "GET", self._w(f"/peers/{observer}/card"),
                                  params={"target": target}, timeout=timeout)
        return out.peer_card

    def set_card(self, observer: str, card: list[str], *, target: str | None = None,
                 timeout: float | None = None) -> list[str] | None:
        out: CardOut = self._call(CardOut, "PUT", self._w(f"/peers/{observer}/card"),
                                  params={"target": target}, json={"peer_card": card},
                                  timeout=timeout)
        return out.peer_card

    # ------------------------------------------------------------------------- conclusions

    def create_conclusions(self, items: list[dict[str, Any]],
                           timeout: float | None = None) -> list[ConclusionOut]:
        """Store conclusions ``{content, observer_id, observed_id, session_id?}`` (answer: 201)."""
        out: list[ConclusionOut] = self._call(list[ConclusionOut], "POST", self._w("/conclusions"),
                                              json={"conclusions": items}, timeout=timeout)
        return out

    def list_conclusions(self, *, observer: str, observed: str, page: int = 1, size: int = 20,
                         timeout: float | None = None) -> PageOut:
        out: PageOut = self._call(PageOut, "POST", self._w("/conclusions/list"),
                                  params={"page": page, "size": size},
                                  json={"filters": {"observer_id": observer, "observed_id": observed}},
                                  timeout=timeout)
        return out

    def all_conclusions(self, *, observer: str, observed: str,
                        timeout: float | None = None) -> Iterator[ConclusionOut]:
        """Every conclusion of ``observer`` about ``observed``, asked for page by page (100 a
        page) as they are read."""
        page = 1
        while True:
            result = self.list_conclusions(observer=observer, observed=observed, page=page,
                                           size=100, timeout=timeout)
            yield from result.items
            if page >= result.pages:
                return
            page += 1

    def query_conclusions(self, query: str, *, observer: str, observed: str, top_k: int = 10,
                          timeout: float | None = None) -> list[ConclusionOut]:
        out: list[ConclusionOut] = self._call(
            list[ConclusionOut], "POST", self._w("/conclusions/query"),
            json={"query": query, "top_k": top_k,
                  "filters": {"observer_id": observer, "observed_id": observed}},
            timeout=timeout)
        return out

    def delete_conclusion(self, conclusion_id: str, timeout: float | None = None) -> None:
        self.request("DELETE", self._w(f"/conclusions/{conclusion_id}"), timeout=timeout)
