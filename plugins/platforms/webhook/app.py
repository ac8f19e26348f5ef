"""The webhook's HTTP application (Starlette): routes, checks in order, replies.

Every POST goes through the same gate, cheapest check first: the declared size (413, body unread),
the signature headers' presence (401, body unread) and plain-ASCII values (400), the body read with
a hard cap on size (413) and time (408), the signature and timestamp (401), a replay (401, keyed on
the MAC the server computed), JSON (400, also when nested too deeply), the fields (422), the
conversation's queue (429). Only then does a turn run, so a refused request stores nothing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hermes_core.dispatch import RESERVED_ATTRIBUTES, Gate, TurnAnswered, TurnFailed
from hermes_core.results import TurnResult
from hermes_core.types import IncomingMessage

from .access import AccessLog, note_reason
from .config import WebhookConfig
from .deliveries import Deliveries, DeliveryConflict, DeliveryStoreUnavailable
from .replays import ReplayStoreUnavailable
from .signing import (
    WEBHOOK_ID_HEADER,
    HeaderError,
    ReplayGuard,
    SignatureError,
    check_headers_present,
    verify_request,
)

if TYPE_CHECKING:
    from hermes_core.dispatch import ConversationDispatcher

__all__ = ["PLATFORM", "TurnRequest", "build_app"]

log = logging.getLogger("hermes_core.plugins.webhook")

#: the platform name sessions opened through the webhook carry
PLATFORM = "webhook"
#: set on an answer given before, to a retry of the same ``webhook-id``
REPLAYED_HEADER = "webhook-replayed"
#: LLM failures that are the server's configuration, not the model provider's mood
_CONFIG_FAILURES = {"auth", "billing", "not_configured"}


class TurnRequest(BaseModel):
    """The JSON body of ``POST /messages`` and ``POST /messages/stream``."""

    model_config = ConfigDict(extra="forbid")

    #: one conversation (one session, kept across requests and restarts): printable, no controls
    conversation_key: str = Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")
    text: str = Field(min_length=1)
    user_id: str | None = Field(default=None, max_length=256)
    #: the user key (memory.scope: user): 1-64 ASCII letters, digits, . _ @ -; same as user_id
    user: str | None = Field(default=None, max_length=100_000)
    #: stored with a new conversation's session (chat id, channel, ...)
    attributes: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


class _Refused(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "HMAC-SHA256"} if self.status == 401 else {}
        if self.extra.pop("close", False):
            headers["Connection"] = "close"
        return JSONResponse({"error": str(self), **self.extra}, status_code=self.status,
                            headers=headers or None)


class _NotJSON(ValueError):
    pass


def _no_constant(name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity``, which Python's parser takes and JSON has not:
    kept in a session's attributes they are stored as text that is not JSON."""
    raise _NotJSON(f"{name} is not a JSON number (RFC 8259); send null or a string instead")


def _user_key(turn: TurnRequest) -> str | None:
    """The request's user key (``user``, or ``user_id``), checked; 400 when it is not usable."""
    from hermes_core.users import UserKeyError, check_user_key

    if turn.user is not None and turn.user_id is not None and turn.user != turn.user_id:
        raise _Refused(400, "user and user_id name different users; send one of them",
                       fields=["user", "user_id"])
    value = turn.user if turn.user is not None else turn.user_id
    if value is None:
        return None
    try:
        return check_user_key(value)
    except UserKeyError as exc:
        field = "user" if turn.user is not None else "user_id"
        raise _Refused(400, f"{field}: {exc}", fields=[field]) from None


def _failure_status(exc: TurnFailed) -> int:
    if exc.failure in ("closed", "store"):  # shutting down; the store is unreachable: retry
        return 503
    if exc.failure == "load" and exc.transient:  # the shared database did not answer: retry
        return 503
    if exc.failure in ("load", "internal"):
        return 500
    if exc.failure == "invalid_key":
        return 400
    if exc.failure == "user_mismatch":  # the conversation key belongs to another user key
        return 403
    return 502  # the model provider failed (or refused our key): a bad gateway for the client


def _reply_body(result: TurnResult, key: str) -> dict[str, Any]:
    return {"reply": result.reply, "conversation_key": key, "session_id": result.session_id}


def _replayed(answered: TurnAnswered) -> JSONResponse:
    """The answer kept for a message id (or the 409 of a reused id)."""
    status, body = answered.answer
    headers = {REPLAYED_HEADER: "true"} if status != 409 else None
    return JSONResponse(body, status_code=status, headers=headers)


@contextlib.contextmanager
def _served_once(deliveries: Deliveries | None, msg_id: str | None
                 ) -> Iterator[JSONResponse | None]:
    """Yields a 202 ``in_progress`` answer when this node is serving ``msg_id`` already."""
    if deliveries is None or msg_id is None:
        yield None
        return
    with deliveries.in_flight(msg_id) as fresh:
        yield None if fresh else JSONResponse(
            {"status": "in_progress", "webhook_id": msg_id,
             "detail": "this message is being answered; send it again later for the answer"},
            status_code=202, headers={"Retry-After": "1"})


def build_app(dispatcher: ConversationDispatcher, config: WebhookConfig, secret: str,
              replays: ReplayGuard | None = None, deliveries: Deliveries | None = None
              ) -> Starlette:
    """The application serving ``dispatcher``; ``secret`` is the shared signing key; ``replays``
    the replay guard (:class:`~.replays.SharedReplayGuard` on a shared database; by default one
    in this process's memory); ``deliveries`` the idempotency records (none: a retried message
    is run again)."""
    guard = replays if replays is not None else ReplayGuard(config.max_skew_seconds)
    shared = type(guard) is not ReplayGuard  # it may wait on the network: off the event loop
    # Threads for requests that block: running turns (bounded by the dispatcher's
    # max_concurrent_turns) and those waiting in their conversation's line (bounded by
    # max_pending_per_conversation). Kept apart from anyio's default pool of 40.
    limiter = anyio.CapacityLimiter(max(256, 2 * config.max_concurrent_turns))

    async def read_checked(request: Request) -> tuple[IncomingMessage, bytes | None]:
        """The checked message and, for a Standard Webhooks request, the SHA-256 of its body
        (its ``webhook-id`` is then ``message_id``, the idempotency key)."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise _Refused(413, f"the body is {declared} bytes; the limit is {config.max_body_bytes}"
                           " (webhook.max_body_bytes)")
        try:
            check_headers_present(request.headers)
        except HeaderError as exc:
            raise _Refused(400, str(exc)) from None
        except SignatureError as exc:
            raise _Refused(401, str(exc)) from None
        body = bytearray()
        try:
            with anyio.fail_after(config.body_timeout_seconds):
                async for chunk in request.stream():  # a chunked body has no length up front
                    body += chunk
                    if len(body) > config.max_body_bytes:
                        raise _Refused(413, f"the body exceeds the limit of {config.max_body_bytes}"
                                       " bytes (webhook.max_body_bytes)")
        except TimeoutError:
            raise _Refused(408, f"the body did not arrive within {config.body_timeout_seconds} s "
                           "(webhook.body_timeout_seconds)", close=True) from None
        try:
            verified = verify_request(secret, request.headers, bytes(body),
                                      max_skew=config.max_skew_seconds)
            if shared:
                await anyio.to_thread.run_sync(guard.check, verified.mac, limiter=limiter)
            else:
                guard.check(verified.mac)
        except HeaderError as exc:
            raise _Refused(400, str(exc)) from None
        except SignatureError as exc:
            raise _Refused(401, str(exc)) from None
        except ReplayStoreUnavailable as exc:
            log.error("%s", exc)
            raise _Refused(503, str(exc), failure="store", transient=True) from None
        try:
            data = json.loads(body, parse_constant=_no_constant)
        except (UnicodeDecodeError, json.JSONDecodeError, _NotJSON) as exc:
            raise _Refused(400, f"the body is not valid JSON: {exc}") from None
        except ValueError as exc:  # an integer past the conversion limit: not a JSONDecodeError
            raise _Refused(400, f"the body's JSON cannot be read: {str(exc).split(';')[0]}; "
                           "send such a number as a string") from None
        except RecursionError:
            raise _Refused(400, "the body's JSON is nested too deeply; send a flat object "
                           '{"conversation_key": ..., "text": ...}') from None
        if not isinstance(data, dict):
            raise _Refused(400, f"the body must be a JSON object, got {type(data).__name__}")
        try:
            turn = TurnRequest.model_validate(data)
        except ValidationError as exc:
            problems = [f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                        for e in exc.errors()]
            fields = sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})
            raise _Refused(422, "invalid request: " + "; ".join(problems), fields=fields) from None
        reserved = sorted(RESERVED_ATTRIBUTES & turn.attributes.keys())
        if reserved:
            raise _Refused(422, f"attributes.{reserved[0]} is set by the server, not by a client: "
                           "send the user key as the top-level field 'user' and the conversation "
                           "as 'conversation_key'", fields=["attributes"])
        user = _user_key(turn)
        waiting = dispatcher.pending(PLATFORM, turn.conversation_key)
        if waiting >= config.max_pending_per_conversation:
            raise _Refused(429, f"conversation {turn.conversation_key!r} already has {waiting} "
                           "messages in line; wait for their replies",
                           conversation_key=turn.conversation_key)
        msg_id = request.headers.get(WEBHOOK_ID_HEADER) if verified.scheme == "standard" else None
        incoming = IncomingMessage(PLATFORM, turn.conversation_key, turn.text, user_id=user,
                                   attributes=dict(turn.attributes), message_id=msg_id)
        return incoming, (hashlib.sha256(body).digest() if msg_id else None)

    def gate_of(incoming: IncomingMessage, body_sha: bytes | None) -> Gate | None:
        """The idempotency gate of a message with a ``webhook-id`` (see :mod:`.deliveries`)."""
        msg_id = incoming.message_id
        if deliveries is None or msg_id is None or body_sha is None:
            return None
        key = incoming.conversation_key

        def gate() -> Callable[[TurnResult | None], None]:
            try:
                claim = deliveries.claim(msg_id, body_sha)
            except DeliveryConflict as exc:
                raise TurnAnswered((409, {"error": str(exc), "webhook_id": msg_id,
                                          "conversation_key": key})) from None
            except DeliveryStoreUnavailable as exc:
                log.error("%s", exc)
                raise TurnFailed(str(exc), conversation_key=key, failure="store",
                                 transient=True) from None
            if claim.outcome == "answered":
                raise TurnAnswered((claim.status, claim.body or {}))

            def finish(result: TurnResult | None) -> None:
                try:
                    if result is None:
                        deliveries.release(msg_id)
                    else:
                        deliveries.answer(msg_id, 200, _reply_body(result, key))
                except DeliveryStoreUnavailable as exc:  # the reply still goes out
                    log.error("%s", exc)

            return finish

        return gate

    def failed(request: Request, exc: TurnFailed, key: str) -> JSONResponse:
        note_reason(request, f"{exc.failure}: {exc}")
        if exc.failure in _CONFIG_FAILURES:
            log.error("conversation %r: %s", key, exc)
        return JSONResponse({"error": str(exc), "failure": exc.failure, "transient": exc.transient,
                             "conversation_key": key}, status_code=_failure_status(exc))

    def turn_endpoint(answer: Callable[[IncomingMessage, Gate | None], Awaitable[Response]]
                      ) -> Callable[[Request], Awaitable[Response]]:
        """A POST route: the request checked, a ``webhook-id`` served once at a time, then
        ``answer``; a failed turn is its error response."""

        async def endpoint(request: Request) -> Response:
            try:
                incoming, body_sha = await read_checked(request)
            except _Refused as refused:
                note_reason(request, str(refused))
                return refused.response()
            with _served_once(deliveries, incoming.message_id) as busy:
                if busy is not None:
                    return busy
                try:
                    return await answer(incoming, gate_of(incoming, body_sha))
                except TurnFailed as exc:
                    return failed(request, exc, incoming.conversation_key)

        return endpoint

    async def message(incoming: IncomingMessage, gate: Gate | None) -> Response:
        try:
            result = await anyio.to_thread.run_sync(
                functools.partial(dispatcher.run, incoming, gate=gate), limiter=limiter)
        except TurnAnswered as answered:
            return _replayed(answered)
        return JSONResponse(_reply_body(result, incoming.conversation_key))

    async def message_stream(incoming: IncomingMessage, gate: Gate | None) -> Response:
        key = incoming.conversation_key
        try:
            chunks = dispatcher.stream(incoming, gate=gate)
            # The first piece decides the status: a turn that fails before any text is an
            # ordinary error response, not a 200 carrying an error event.
            first = await anyio.to_thread.run_sync(next, chunks, None, limiter=limiter)
        except TurnAnswered as answered:
            status, body = answered.answer
            if status != 200:
                return _replayed(answered)
            return StreamingResponse(
                iter([_event("delta", {"text": body.get("reply", "")}),
                      _event("done", {"reply": body.get("reply", ""),
                                      "conversation_key": key})]),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", REPLAYED_HEADER: "true"})
        return StreamingResponse(_events(first, chunks, key, limiter),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", **dispatcher.stats()})

    return Starlette(routes=[
        Route("/messages", turn_endpoint(message), methods=["POST"]),
        Route("/messages/stream", turn_endpoint(message_stream), methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ], middleware=[Middleware(AccessLog)])


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _events(first: str | None, chunks: Iterator[str], key: str,
                  limiter: anyio.CapacityLimiter) -> AsyncIterator[str]:
    """Server-sent events: ``delta`` per piece of text, then ``done`` (or ``error``)."""
    parts: list[str] = []
    piece = first
    try:
        while piece is not None:
            parts.append(piece)
            yield _event("delta", {"text": piece})
            piece = await anyio.to_thread.run_sync(next, chunks, None, limiter=limiter)
    except TurnFailed as exc:
        yield _event("error", {"error": str(exc), "failure": exc.failure,
                               "transient": exc.transient, "conversation_key": key})
        return
    yield _event("done", {"reply": "".join(parts), "conversation_key": key})
