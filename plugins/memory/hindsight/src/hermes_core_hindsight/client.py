"""A small typed client of the Hindsight HTTP API, on httpx.

Why not the vendor's ``hindsight-client``: it is aiohttp-based, so every call from the kernel's
threads would have to be scheduled onto an event loop kept alive on a thread of its own (as Hermes
does), and its generated models drag in a large dependency tree. The provider needs five endpoints,
synchronous calls from a few threads, and a *per-call* timeout (a prefetch must give up after
0.2 s while a reflect may take a minute). httpx is already a hermes-core dependency, is
thread-safe, takes a timeout per request and an ``httpx.MockTransport`` for unit tests.

Every failure becomes a :class:`HindsightError`:

* :class:`HindsightUnavailable` — the server could not be reached, timed out, or answered 5xx/429:
  worth retrying later;
* :class:`HindsightRejected` — the server refused the request (4xx): retrying will not help; the
  message carries the server's ``detail``;
* :class:`HindsightNoLLM` — the server has no LLM configured, so it cannot do what was asked
  (reflect).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import httpx

from hermes_core.errors import HermesCoreError

__all__ = [
    "HindsightClient",
    "HindsightError",
    "HindsightNoLLM",
    "HindsightRejected",
    "HindsightUnavailable",
    "Memory",
    "ServerInfo",
    "has_words",
    "version_tuple",
]

_PREFIX = "/v1/default/banks"
_WORD = re.compile(r"\w", re.UNICODE)
#: ``_request``'s default for ``missing``: a 404 raises
_RAISE = object()
#: what ``_request`` answers a 404 with in ``pending_operations``: the bank does not exist
_NO_BANK = object()


class HindsightError(HermesCoreError):
    """A call to the Hindsight server failed; the message says which and why."""


class HindsightUnavailable(HindsightError):
    """The server could not be reached, timed out, or failed (5xx, 429): try again later."""


class HindsightRejected(HindsightError):
    """The server refused the request (4xx); ``status`` and ``detail`` say why."""

    def __init__(self, message: str, *, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class HindsightNoLLM(HindsightRejected):
    """The server runs without an LLM (``HINDSIGHT_API_LLM_PROVIDER=none``) and cannot do this."""


def has_words(text: str) -> bool:
    """Whether ``text`` has a word character: the server refuses recall queries without one."""
    return bool(_WORD.search(text))


def version_tuple(text: str) -> tuple[int, ...]:
    """``"1.1.0"`` -> ``(1, 1, 0)``; unparsable parts count as 0 (``"0.5.0rc1"`` -> (0, 5, 0))."""
    out = []
    for part in text.split(".")[:3]:
        digits = re.match(r"\d+", part)
        out.append(int(digits.group()) if digits else 0)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``GET /version`` says about the server."""

    api_version: str
    #: observations (LLM-consolidated memories) are enabled
    observations: bool
    features: dict[str, Any] = field(default_factory=dict)

    @property
    def supports_append(self) -> bool:
        """Retain with ``update_mode="append"`` exists since API 0.5.0."""
        return version_tuple(self.api_version) >= (0, 5, 0)


@dataclass(frozen=True, slots=True)
class Memory:
    """One recalled memory."""

    id: str
    text: str
    type: str | None = None
    document_id: str | None = None
    tags: tuple[str, ...] = ()
    mentioned_at: str | None = None
    occurred_start: str | None = None
    score: float | None = None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Memory:
        scores = raw.get("scores") or {}
        final = scores.get("final") if isinstance(scores, dict) else None
        return cls(
            id=str(raw.get("id", "")),
            text=str(raw.get("text", "")),
            type=raw.get("type"),
            document_id=raw.get("document_id"),
            tags=tuple(raw.get("tags") or ()),
            mentioned_at=raw.get("mentioned_at"),
            occurred_start=raw.get("occurred_start"),
            score=float(final) if isinstance(final, int | float) else None,
        )

    def as_dict(self) -> dict[str, Any]:
        """A compact JSON form for tool results."""
        out: dict[str, Any] = {"text": self.text, "type": self.type}
        when = self.occurred_start or self.mentioned_at
        if when:
            out["when"] = when[:10]
        session = next((t.split(":", 1)[1] for t in self.tags if t.startswith("session:")), None)
        if session:
            out["session"] = session
        return out


class HindsightClient:
    """Synchronous calls to one Hindsight server; safe to share between threads."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        connect_timeout: float = 2.0,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json", "User-Agent": "hermes-core-hindsight"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self.connect_timeout = connect_timeout
        self.default_timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            # a few threads at most: the provider's lanes, the reader pool, a tool call
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------------------- plumbing

    def _request(self, method: str, path: str, *, json: Any = None,
                 params: dict[str, Any] | None = None, timeout: float | None = None,
                 missing: Any = _RAISE) -> Any:
        """The decoded answer; ``missing``, when given, is the answer to a 404 (an unknown bank
        or operation) instead of :class:`HindsightRejected`."""
        limit = self.default_timeout if timeout is None else timeout
        what = f"{method} {path}"
        try:
            response = self._http.request(
                method, path, json=json, params=params,
                timeout=httpx.Timeout(limit, connect=min(self.connect_timeout, limit)),
            )
        except httpx.TimeoutException as exc:
            raise HindsightUnavailable(
                f"Hindsight at {self.base_url} did not answer {what} within {limit:g} s "
                f"({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise HindsightUnavailable(
                f"cannot reach Hindsight at {self.base_url} ({what}): {exc or type(exc).__name__}. "
                "Is hindsight-api running there? Check hindsight.base_url") from None
        status = response.status_code
        if status >= 500 or status == 429:
            raise HindsightUnavailable(
                f"Hindsight at {self.base_url} failed {what}: HTTP {status} {_detail(response)}")
        if status == 404 and missing is not _RAISE:
            return missing
        if status >= 400:
            detail = _detail(response)
            if status in (401, 403):
                message = (f"Hindsight at {self.base_url} refused {what}: HTTP {status} {detail}. "
                           "Check the API key (environment HINDSIGHT_API_KEY)")
            else:
                message = f"Hindsight at {self.base_url} refused {what}: HTTP {status} {detail}"
            if "requires an llm" in detail.lower():
                raise HindsightNoLLM(message, status=status, detail=detail)
            raise HindsightRejected(message, status=status, detail=detail)
        try:
            return response.json()
        except ValueError:
            raise HindsightUnavailable(
                f"Hindsight at {self.base_url} answered {what} with something that is not JSON "
                f"(HTTP {status}, {response.headers.get('content-type', 'no content type')}); is "
                "hindsight.base_url pointing at hindsight-api?") from None

    # ------------------------------------------------------------------------------ endpoints

    def version(self, *, timeout: float | None = None) -> ServerInfo:
        """``GET /version``: the API version and which features are on."""
        data = self._request("GET", "/version", timeout=timeout)
        if not isinstance(data, dict):
            raise HindsightUnavailable(f"unexpected /version answer from {self.base_url}: {data!r}")
        raw = data.get("features")
        features: dict[str, Any] = raw if isinstance(raw, dict) else {}
        version = str(data.get("api_version") or data.get("version") or "0")
        return ServerInfo(version, bool(features.get("observations", False)), dict(features))

    def health(self, *, timeout: float | None = None) -> dict[str, Any]:
        """``GET /health``: database reachability (a 503 raises :class:`HindsightUnavailable`)."""
        data = self._request("GET", "/health", timeout=timeout)
        return data if isinstance(data, dict) else {"status": str(data)}

    def bank_ids(self, *, search: str | None = None, page: int = 100,
                 max_banks: int = 100_000, timeout: float | None = None) -> list[str]:
        """``GET /banks``: the ids of the server's banks (``search``: a substring of the id or
        name), page by page, at most ``max_banks``."""
        ids: list[str] = []
        while len(ids) < max_banks:
            params: dict[str, Any] = {"limit": page, "offset": len(ids)}
            if search:
                params["q"] = search
            data = self._request("GET", _PREFIX, params=params, timeout=timeout)
            banks = data.get("banks") if isinstance(data, dict) else None
            if not isinstance(banks, list):
                raise HindsightUnavailable(f"unexpected bank list from {self.base_url}: {data!r}")
            ids.extend(str(b["bank_id"]) for b in banks if isinstance(b, dict) and b.get("bank_id"))
            if len(banks) < page or len(ids) >= int(data.get("total") or 0):
                break
        return ids

    def retain(self, bank: str, items: list[dict[str, Any]], *, async_: bool = False,
               operation_id: str | None = None, timeout: float | None = None) -> dict[str, Any]:
        """``POST /banks/{bank}/memories``: store ``items`` (see the API's MemoryItem).

        With ``async_`` the server queues the work in its database and answers at once; an
        ``operation_id`` (a UUID) makes a re-sent request a no-op instead of a duplicate.
        """
        body: dict[str, Any] = {"items": items, "async": async_}
        if async_ and operation_id:
            body["operation_id"] = operation_id
        data = self._request("POST", f"{_PREFIX}/{bank}/memories", json=body, timeout=timeout)
        if not isinstance(data, dict) or data.get("success") is False:
            raise HindsightUnavailable(f"Hindsight did not confirm the retain: {data!r}")
        return data

    def recall(self, bank: str, query: str, *, types: list[str] | None = None,
               budget: str = "mid", max_tokens: int = 2048, tags: list[str] | None = None,
               tags_match: str = "any", timeout: float | None = None) -> list[Memory]:
        """``POST /banks/{bank}/memories/recall``: memories relevant to ``query``, best first."""
        if not has_words(query):
            return []  # the server answers 422 for such a query; nothing can match it anyway
        body: dict[str, Any] = {"query": query, "budget": budget, "max_tokens": max_tokens}
        if types:
            body["types"] = list(types)
        if tags:
            body["tags"] = list(tags)
            body["tags_match"] = tags_match
        # a bank is created by its first retain: an unknown one has nothing stored yet
        data = self._request("POST", f"{_PREFIX}/{bank}/memories/recall", json=body,
                             timeout=timeout, missing={"results": []})
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise HindsightUnavailable(f"unexpected recall answer from {self.base_url}: {data!r}")
        return [Memory.from_json(r) for r in results if isinstance(r, dict) and r.get("text")]

    def reflect(self, bank: str, query: str, *, budget: str = "mid", context: str | None = None,
                timeout: float | None = None) -> str:
        """``POST /banks/{bank}/reflect``: the server's LLM answers ``query`` from the bank.

        Raises :class:`HindsightNoLLM` when the server has no LLM.
        """
        body: dict[str, Any] = {"query": query, "budget": budget}
        if context:
            body["context"] = context
        data = self._request("POST", f"{_PREFIX}/{bank}/reflect", json=body, timeout=timeout)
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            raise HindsightUnavailable(f"unexpected reflect answer from {self.base_url}: {data!r}")
        return str(data["text"])

    def operation_status(self, bank: str, operation_id: str, *,
                         timeout: float | None = None) -> tuple[str, str | None]:
        """``GET /banks/{bank}/operations/{id}``: the operation's status (``pending``,
        ``processing``, ``completed``, ``failed``, ``cancelled`` or ``not_found``) and its error
        message, if any."""
        data = self._request("GET", f"{_PREFIX}/{bank}/operations/{operation_id}",
                             timeout=timeout, missing=None)
        if not isinstance(data, dict):
            return "not_found", None
        return str(data.get("status") or "not_found"), data.get("error_message")

    def pending_operations(self, bank: str, *, timeout: float | None = None) -> int:
        """How many async operations (retains, consolidations) of ``bank`` are not finished.

        A bank that does not exist yet has none.
        """
        total = 0
        for status in ("pending", "processing"):
            data = self._request("GET", f"{_PREFIX}/{bank}/operations",
                                 params={"status": status, "limit": 1}, timeout=timeout,
                                 missing=_NO_BANK)
            if data is _NO_BANK:
                return 0
            total += int(data.get("total", 0)) if isinstance(data, dict) else 0
        return total


def _detail(response: httpx.Response) -> str:
    """The server's error text: FastAPI's ``{"detail": ...}`` or the first 300 characters."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(data, dict) and "detail" in data:
        detail = data["detail"]
        if isinstance(detail, list):  # validation errors: [{"loc": [...], "msg": ...}]
            return "; ".join(
                f"{'.'.join(str(p) for p in d.get('loc', ()))}: {d.get('msg')}"
                if isinstance(d, dict) else str(d) for d in detail)
        return str(detail)
    return str(data)[:300]
