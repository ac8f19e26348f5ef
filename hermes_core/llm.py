"""The kernel's LLM interface, and its Anthropic implementation.

:class:`LLM` is the small protocol everything else depends on (the compressor's summariser, later
the agent loop): ``complete`` returns text, ``respond`` returns text, tool calls and usage. Tests
inject their own implementation or point :class:`AnthropicLLM` at the loopback server in
:mod:`hermes_core.testing.messages_api`.

Failures are classified structurally into :class:`LLMFailure` from the SDK's exception types and
HTTP status codes (never by matching message text), so callers can decide per class: the
compressor falls back to a deterministic summary for every class, the agent loop may retry only
transient ones.

The anthropic SDK is imported on the first request, not at import time: it costs close to a
second of start-up, which ``--help`` and the compressor's no-key path never pay.
"""

from __future__ import annotations

import enum
import functools
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from .anthropic_request import (
    CacheTTL,
    apply_cache_breakpoints,
    build_request,
    cache_marker,
    to_anthropic_messages,
)
from .errors import HermesCoreError
from .types import Message, ToolCall, Usage

if TYPE_CHECKING:
    from .config import CoreConfig

__all__ = [
    "LLM",
    "AnthropicLLM",
    "ChatLLM",
    "LLMError",
    "LLMFailure",
    "LLMResponse",
    "apply_cache_breakpoints",
    "build_request",
    "cache_marker",
    "classify_exception",
    "failure_for_status",
    "retry_within",
    "run_with_deadline",
    "to_anthropic_messages",
]



class LLMFailure(enum.StrEnum):
    """Why an LLM call failed; decided from exception types and status codes."""

    RATE_LIMITED = "rate_limited"  #: HTTP 429
    OVERLOADED = "overloaded"  #: HTTP 529
    SERVER_ERROR = "server_error"  #: other HTTP 5xx
    TIMEOUT = "timeout"  #: the client's deadline passed, or HTTP 408
    CONNECTION = "connection"  #: the endpoint could not be reached
    AUTH = "auth"  #: HTTP 401/403: a missing, wrong or unauthorised key
    BILLING = "billing"  #: HTTP 402
    BAD_REQUEST = "bad_request"  #: HTTP 400/404/413/422: the request itself is wrong
    EMPTY = "empty"  #: HTTP 200 with no text where text was required
    NOT_CONFIGURED = "not_configured"  #: no API key, so no call was made
    WINDOW_TOO_SMALL = "window_too_small"  #: the input cannot fit the model's window
    OTHER = "other"

    @property
    def transient(self) -> bool:
        """Whether the same call may succeed a little later."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {
        LLMFailure.RATE_LIMITED,
        LLMFailure.OVERLOADED,
        LLMFailure.SERVER_ERROR,
        LLMFailure.TIMEOUT,
        LLMFailure.CONNECTION,
        LLMFailure.EMPTY,
    }
)


class LLMError(HermesCoreError):
    """An LLM call failed; ``failure`` says how, ``status`` is the HTTP status if there was one."""

    def __init__(self, message: str, *, failure: LLMFailure, status: int | None = None) -> None:
        super().__init__(message)
        self.failure = failure
        self.status = status

    @property
    def transient(self) -> bool:
        return self.failure.transient


@dataclass(slots=True)
class LLMResponse:
    """One model response, provider-neutral."""

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    model: str | None = None

    def as_message(self) -> Message:
        """The response as the assistant message to append to a history."""
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


@runtime_checkable
class LLM(Protocol):
    """What the kernel needs from a language model."""

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """Return the model's text answer; raise :class:`LLMError` on failure or empty text."""
        ...


@runtime_checkable
class ChatLLM(LLM, Protocol):
    """What the agent loop needs: :meth:`respond`, one call with tools and optional streaming.

    :class:`AnthropicLLM` implements it against the Messages API; ``hermes_core.replay.ReplayLLM``
    answers from a recorded transcript.
    """

    def respond(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> LLMResponse:
        """One model call; ``on_text`` (when given) receives each streamed text delta."""
        ...


# --------------------------------------------------------------------------------------------------
# Failure classification
# --------------------------------------------------------------------------------------------------

_STATUS_FAILURES: dict[int, LLMFailure] = {
    400: LLMFailure.BAD_REQUEST,
    401: LLMFailure.AUTH,
    402: LLMFailure.BILLING,
    403: LLMFailure.AUTH,
    404: LLMFailure.BAD_REQUEST,
    408: LLMFailure.TIMEOUT,
    413: LLMFailure.BAD_REQUEST,
    422: LLMFailure.BAD_REQUEST,
    429: LLMFailure.RATE_LIMITED,
    529: LLMFailure.OVERLOADED,
}


def failure_for_status(status: int) -> LLMFailure:
    """The failure class of an HTTP status code."""
    if status in _STATUS_FAILURES:
        return _STATUS_FAILURES[status]
    return LLMFailure.SERVER_ERROR if status >= 500 else LLMFailure.OTHER


def classify_exception(exc: BaseException) -> LLMError:
    """Turn what the SDK (or transport) raised into an :class:`LLMError`, by type and status."""
    if isinstance(exc, LLMError):
        return exc
    import anthropic  # already imported: the exception came from it (or the call never ran)

    if isinstance(exc, anthropic.APITimeoutError):
        return LLMError(f"the LLM request timed out: {exc}", failure=LLMFailure.TIMEOUT)
    if isinstance(exc, anthropic.APIConnectionError):
        return LLMError(f"the LLM endpoint could not be reached: {exc}", failure=LLMFailure.CONNECTION)
    if isinstance(exc, anthropic.APIStatusError):
        status = int(exc.status_code)
        failure = failure_for_status(status)
        return LLMError(f"the LLM returned HTTP {status}: {exc.message}", failure=failure, status=status)
    if isinstance(exc, TimeoutError):
        return LLMError(f"the LLM request timed out: {exc}", failure=LLMFailure.TIMEOUT)
    return LLMError(f"the LLM call failed: {type(exc).__name__}: {exc}", failure=LLMFailure.OTHER)


# --------------------------------------------------------------------------------------------------
# The Anthropic implementation
# --------------------------------------------------------------------------------------------------


class AnthropicLLM:
    """:class:`LLM` on the anthropic SDK (any Messages-API-compatible endpoint).

    Retries are the SDK's own (``max_retries``, honouring ``retry-after``), except when a call
    passes ``timeout``: that bounds the whole call and the retries are budgeted within it (see
    :meth:`respond`). The client is built on the first call; ``client=`` injects one.
    """

    def __init__(
        self,
        *,
        api_key: str | None,
        model: str = "claude-sonnet-4-6",
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        cache_ttl: CacheTTL | None = "5m",
        client: Any = None,
    ) -> None:
        self.api_key = api_key
        self.model = model
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.cache_ttl = cache_ttl
        self._client = client
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: CoreConfig, *, model: str | None = None) -> AnthropicLLM:
        """Built from ``llm.*``; ``model`` overrides ``llm.model`` (e.g. the auxiliary model)."""
        llm = config.llm
        key = llm.api_key.get_secret_value() if llm.api_key is not None else None
        return cls(
            api_key=key,
            model=model or llm.model,
            base_url=llm.base_url,
            max_retries=llm.max_retries,
            timeout=llm.timeout,
            cache_ttl=llm.cache_ttl,
        )

    @property
    def client(self) -> Any:
        """The ``anthropic.Anthropic`` client, created on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    if not self.api_key:
                        raise LLMError(
                            "no API key for the LLM: set llm.api_key in config.yaml or the "
                            "ANTHROPIC_API_KEY environment variable",
                            failure=LLMFailure.NOT_CONFIGURED,
                        )
                    import anthropic

                    self._client = anthropic.Anthropic(
                        api_key=self.api_key,
                        base_url=self.base_url,
                        max_retries=self.max_retries,
                        timeout=self.timeout,
                    )
        return self._client

    def build_request(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        model: str | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The body this instance would send (see :func:`build_request`)."""
        return build_request(
            system=system,
            messages=messages,
            model=model or self.model,
            max_tokens=max_tokens,
            tools=tools,
            cache_ttl=self.cache_ttl,
        )

    def respond(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> LLMResponse:
        """One Messages-API call; streams when ``on_text`` is given (called with each text delta).

        Without ``timeout`` the client's settings apply: ``llm.timeout`` per attempt and the SDK's
        ``max_retries``. With ``timeout``, it bounds the WHOLE call, retries and their back-off
        included: the SDK's own retries are off, each attempt gets only the time that is left,
        back-off never sleeps past the deadline, and the attempt runs on a helper thread that is
        abandoned at the deadline (so even a server dripping one byte at a time cannot hold the
        caller). Raises :class:`LLMError` (classified) for every failure of the call itself.
        """
        request = self.build_request(
            system=system, messages=messages, max_tokens=max_tokens, model=model, tools=tools
        )
        client = self.client
        if timeout is None:
            return _to_response(_attempt(client, request, on_text, {}))
        return _to_response(self._bounded(client, request, on_text, float(timeout)))

    def _bounded(
        self,
        client: Any,
        request: dict[str, Any],
        on_text: Callable[[str], None] | None,
        total: float,
    ) -> Any:
        once = client.with_options(max_retries=0)
        return retry_within(
            lambda remaining: _attempt(once, request, on_text, {"timeout": remaining}),
            total=total, max_retries=self.max_retries, classify=classify_exception,
        )

    def complete(
        self,
        *,
        system: str,
        messages: list[Message],
        max_tokens: int,
        model: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """The text of one response; an empty or whitespace-only answer is an ``EMPTY`` failure."""
        response = self.respond(
            system=system, messages=messages, max_tokens=max_tokens, model=model, timeout=timeout
        )
        if not response.text.strip():
            raise LLMError(
                f"the LLM answered with no text (stop_reason={response.stop_reason!r})",
                failure=LLMFailure.EMPTY,
            )
        return response.text


def _attempt(
    client: Any,
    request: dict[str, Any],
    on_text: Callable[[str], None] | None,
    options: dict[str, Any],
) -> Any:
    """One request (with the client's own retries); SDK errors become :class:`LLMError`."""
    try:
        if on_text is not None:
            with client.messages.stream(**request, **options) as stream:
                for delta in stream.text_stream:
                    on_text(delta)
                return stream.get_final_message()
        return client.messages.create(**request, **options)
    except LLMError:
        raise
    except Exception as exc:
        raise classify_exception(exc) from exc


T = TypeVar("T")


def retry_within(
    attempt: Callable[[float], T],
    *,
    total: float,
    max_retries: int,
    classify: Callable[[BaseException], LLMError] = classify_exception,
) -> T:
    """``attempt(remaining_seconds)`` retried within ``total`` seconds, back-off included.

    Each attempt runs under :func:`run_with_deadline` with the time that is left (an attempt
    should also bound its own request by it); only transient failures are retried, at most
    ``max_retries`` times, waiting as :func:`_backoff` says but never past the deadline.
    ``classify`` turns what an attempt raised into an :class:`LLMError` (a client passes its
    SDK's classifier). Every model client with a total bound uses this one loop.
    """
    deadline = time.monotonic() + total
    tries = 0
    while True:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError(f"no time left of the {total:g} s bound")
            return run_with_deadline(functools.partial(attempt, remaining), remaining)
        except LLMError as exc:
            error, wait = exc, _backoff(tries, exc)
        except Exception as exc:
            error, wait = classify(exc), _backoff(tries, exc)
        if time.monotonic() >= deadline - 0.01:
            raise LLMError(
                f"the LLM call took longer than its {total:g} s bound, retries included "
                f"({tries + 1} attempt(s)); last problem: {error}",
                failure=LLMFailure.TIMEOUT, status=error.status,
            ) from error
        if not error.transient or tries >= max_retries:
            raise error
        if time.monotonic() + wait >= deadline:
            raise LLMError(
                f"{error} (not retried: the {total:g} s bound leaves no time to wait "
                f"{wait:.1f} s and try again)", failure=error.failure, status=error.status,
            ) from error
        time.sleep(wait)
        tries += 1


def _backoff(attempt: int, exc: BaseException | None) -> float:
    """Seconds before retry ``attempt + 1``: the server's ``retry-after`` if it sent one, else
    exponential (0.5 s, 1 s, 2 s, ... up to 8 s) with jitter."""
    cause = exc.__cause__ if isinstance(exc, LLMError) else exc
    headers = getattr(getattr(cause, "response", None), "headers", None)
    if headers is not None:
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            value = headers.get(name)
            if value is not None:
                try:
                    return max(0.0, float(value) * scale)
                except ValueError:
                    pass
    return float(min(8.0, 0.5 * 2**attempt) * (0.75 + random.random() / 2))


def run_with_deadline(fn: Callable[[], T], seconds: float) -> T:
    """``fn()``, or :class:`LLMError` (``TIMEOUT``) once ``seconds`` have passed.

    ``fn`` runs on a daemon thread; at the deadline the caller stops waiting and the thread is
    left to finish on its own (an HTTP attempt is itself bounded by its own timeout, so it ends
    soon after). Whatever ``fn`` raises is raised here.
    """
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="llm-call", daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        raise LLMError(f"no answer within {seconds:.1f} s", failure=LLMFailure.TIMEOUT)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def _to_response(message: Any) -> LLMResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in getattr(message, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            args = block.input if isinstance(block.input, dict) else {"input": block.input}
            calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(args)))
    raw_usage = getattr(message, "usage", None)
    usage = Usage(
        input_tokens=int(getattr(raw_usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(raw_usage, "output_tokens", 0) or 0),
        cache_read_tokens=int(getattr(raw_usage, "cache_read_input_tokens", 0) or 0),
        cache_write_tokens=int(getattr(raw_usage, "cache_creation_input_tokens", 0) or 0),
        model=getattr(message, "model", None),
    )
    return LLMResponse(
        text="".join(texts),
        tool_calls=calls,
        usage=usage,
        stop_reason=getattr(message, "stop_reason", None),
        model=getattr(message, "model", None),
    )
