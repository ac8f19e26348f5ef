"""The Messages-API client: request building (prompt caching ``system_and_3``), streaming,
retries within a total deadline, failure classification, context windows and token counts.

The anthropic SDK is imported on the first request, not at import time: it costs close to a
second of start-up, which ``--help`` and the compressor's no-key path never pay.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hermes_core.anthropic_request import CacheTTL, build_request
from hermes_core.config import CoreConfig
from hermes_core.kinds import LLMClient, PluginContext
from hermes_core.llm import (
    LLMError,
    LLMFailure,
    LLMResponse,
    call_within,
    failure_for_status,
)
from hermes_core.models import lookup_context_window
from hermes_core.types import Message, ToolCall, Usage

from .platform import PlatformContext, check_edits

__all__ = ["AnthropicClient", "AnthropicSettings", "classify_exception"]

log = logging.getLogger("hermes_core.plugins.anthropic")

_NO_KEY = ("no API key for the LLM: set llm.api_key in config.yaml or the ANTHROPIC_API_KEY "
           "environment variable")
_UNSET: Any = object()


class AnthropicSettings(BaseModel):
    """The ``anthropic:`` section (the connection itself is ``llm.base_url`` / ``llm.api_key``)."""

    model_config = ConfigDict(extra="forbid")

    #: ask the Messages API's ``count_tokens`` endpoint for exact prompt sizes (one small request
    #: per new prompt, cached) instead of the kernel's local estimate; needs a key
    count_tokens: bool = False
    #: seconds one count may take before the local estimate is used instead
    count_tokens_timeout: float = Field(default=5.0, gt=0, le=60)


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
        hint = (" (the key is missing, wrong or not allowed: check ANTHROPIC_API_KEY / llm.api_key)"
                if failure is LLMFailure.AUTH else "")
        return LLMError(f"the LLM returned HTTP {status} ({failure.value}): {exc.message}{hint}",
                        failure=failure, status=status)
    if isinstance(exc, TimeoutError):
        return LLMError(f"the LLM request timed out: {exc}", failure=LLMFailure.TIMEOUT)
    return LLMError(f"the LLM call failed: {type(exc).__name__}: {exc}", failure=LLMFailure.OTHER)


class AnthropicClient(LLMClient):
    """The ``anthropic`` model client, on the anthropic SDK (any Messages-API-compatible endpoint).

    The kernel builds it with ``(config, context)`` and it reads ``context.config.llm``; code and
    tests may also build one directly with keywords (``api_key=``, ``base_url=``, ``model=``,
    ``max_retries=``, ``timeout=``, ``cache_ttl=``, ``client=`` to inject an SDK client).

    Retries are the SDK's own (``max_retries``, honouring ``retry-after``), except when a call
    passes ``timeout``: that bounds the whole call and the retries are budgeted within it (see
    :meth:`respond`). A 401/403 (``AUTH``) is never retried.
    """

    name = "anthropic"
    Config = AnthropicSettings
    description = "Anthropic's Messages API (the official anthropic SDK)"

    def __init__(
        self,
        config: BaseModel | None = None,
        context: PluginContext | None = None,
        *,
        api_key: str | None = _UNSET,
        model: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        cache_ttl: CacheTTL | None = "5m",
        client: Any = None,
    ) -> None:
        settings = config if isinstance(config, AnthropicSettings) else AnthropicSettings()
        super().__init__(settings, context)  # type: ignore[arg-type]
        self.settings = settings
        core = context.config if context is not None else None
        if core is not None:
            llm = core.llm
            api_key = llm.api_key.get_secret_value() if llm.api_key is not None else None
            model, base_url, max_retries = model or llm.model, llm.base_url, llm.max_retries
            timeout, cache_ttl = llm.timeout, llm.cache_ttl
        self.api_key: str | None = None if api_key is _UNSET else api_key
        self.model = model or "claude-sonnet-4-6"
        self.base_url = base_url
        self.max_retries = max_retries
        self.timeout = timeout
        self.cache_ttl = cache_ttl
        self._client = client
        self._lock = threading.Lock()
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._platform: PlatformContext | None = None

    @classmethod
    def from_config(cls, config: CoreConfig, *, model: str | None = None) -> AnthropicClient:
        """Built from ``llm.*``; ``model`` overrides ``llm.model`` (e.g. the auxiliary model)."""
        llm = config.llm
        return cls(api_key=llm.api_key.get_secret_value() if llm.api_key is not None else None,
                   model=model or llm.model, base_url=llm.base_url, max_retries=llm.max_retries,
                   timeout=llm.timeout, cache_ttl=llm.cache_ttl)

    @property
    def client(self) -> Any:
        """The ``anthropic.Anthropic`` client, created on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    if not self.api_key:
                        raise LLMError(_NO_KEY, failure=LLMFailure.NOT_CONFIGURED)
                    import anthropic

                    self._client = anthropic.Anthropic(
                        api_key=self.api_key, base_url=self.base_url,
                        max_retries=self.max_retries, timeout=self.timeout)
        return self._client

    def build_request(self, *, system: str, messages: Sequence[Message], max_tokens: int,
                      model: str | None = None, tools: Sequence[dict[str, Any]] | None = None
                      ) -> dict[str, Any]:
        """The body this instance would send (see :func:`hermes_core.llm.build_request`)."""
        return build_request(system=system, messages=messages, model=model or self.model,
                             max_tokens=max_tokens, tools=tools, cache_ttl=self.cache_ttl)

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
        included (:func:`hermes_core.llm.call_within`): the SDK's own retries are off, each
        attempt gets only the time that is left, and an attempt still running at the deadline
        is abandoned. Raises :class:`LLMError` (classified) for every failure of the call.
        """
        request = self.build_request(system=system, messages=messages, max_tokens=max_tokens,
                                     model=model, tools=tools)
        platform = self._platform
        if platform is None or not platform.active:
            return self._send(request, on_text, timeout)
        try:
            return self._send({**request, **platform.fields()}, on_text, timeout)
        except LLMError as exc:
            if not platform.may_be_refusal(exc):
                raise
            # the same request without the feature: when it goes through, the feature was the
            # problem, and the engine's local path takes over from now on
            response = self._send(request, on_text, timeout)
            platform.refuse(exc)
            return response

    def _send(self, request: dict[str, Any], on_text: Callable[[str], None] | None,
              timeout: float | None) -> LLMResponse:
        client = self.client
        if timeout is None:
            return to_response(_attempt(client, request, on_text, {}))
        once = client.with_options(max_retries=0)
        message = call_within(lambda left: _attempt(once, request, on_text, {"timeout": left}),
                              total=float(timeout), max_retries=self.max_retries,
                              classify=classify_exception)
        return to_response(message)

    def platform_context(self, edits: Sequence[dict[str, Any]],
                         on_refused: Callable[[str], None]) -> str | None:
        """Send ``edits`` as ``context_management`` (with their ``anthropic-beta`` headers) on
        every call and count from now on; raises :class:`~hermes_core.errors.ConfigError` for an
        edit the installed SDK does not define. An empty list switches it off."""
        checked = check_edits(edits)
        with self._lock:
            current = self._platform
            if checked and current is not None and current.edits == checked:
                # another engine on this client (a delegated child's): the same edits
                if current.refused is not None:
                    return f"the Messages API refused them earlier: {current.refused}"
                current.listen(on_refused)
                return None
            self._platform = PlatformContext(checked) if checked else None
            if self._platform is not None:
                self._platform.listen(on_refused)
            self._counts.clear()
        return None

    def unavailable(self) -> str | None:
        if self.api_key or self._client is not None:
            return None
        return ("no API key is configured: export ANTHROPIC_API_KEY=... (or set llm.api_key in "
                "config.yaml; llm.base_url for another Messages-API endpoint)")

    def context_window(self, model: str) -> int | None:
        """The window of a known Claude model (the kernel's table), else ``None``."""
        return lookup_context_window(model)

    def count_tokens(self, *, system: str, messages: Sequence[Message],
                     tools: Sequence[dict[str, Any]] | None, model: str) -> int | None:
        """The prompt's size from the ``count_tokens`` endpoint when ``anthropic.count_tokens``
        is on and a key is set; ``None`` otherwise or when the count fails (logged). Counts are
        cached by prompt, so asking twice about one prompt costs one request."""
        if not self.settings.count_tokens or not self.api_key or not messages:
            return None
        try:
            request = self.build_request(system=system, messages=messages, max_tokens=1,
                                         model=model, tools=tools)
        except ValueError:
            return None
        request.pop("max_tokens", None)
        platform = self._platform
        if platform is not None and platform.active:
            request.update(platform.fields())  # the count after the server's edits
        key = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()
        with self._lock:
            if key in self._counts:
                self._counts.move_to_end(key)
                return self._counts[key]
        try:
            once = self.client.with_options(max_retries=0,
                                            timeout=self.settings.count_tokens_timeout)
            api = once.beta.messages if "betas" in request else once.messages
            counted = int(api.count_tokens(**request).input_tokens)
        except Exception as exc:
            log.info("count_tokens failed, using the local estimate: %s", classify_exception(exc))
            return None
        with self._lock:
            self._counts[key] = counted
            while len(self._counts) > 64:
                self._counts.popitem(last=False)
        return counted

    def close(self) -> None:
        client, self._client = self._client, None
        closer = getattr(client, "close", None)
        if callable(closer):
            closer()


def _attempt(client: Any, request: dict[str, Any], on_text: Callable[[str], None] | None,
             options: dict[str, Any]) -> Any:
    """One request (with the client's own retries); SDK errors become :class:`LLMError`."""
    api = client.beta.messages if "betas" in request else client.messages
    try:
        if on_text is not None:
            with api.stream(**request, **options) as stream:
                for delta in stream.text_stream:
                    on_text(delta)
                return stream.get_final_message()
        return api.create(**request, **options)
    except LLMError:
        raise
    except Exception as exc:
        raise classify_exception(exc) from exc


def to_response(message: Any) -> LLMResponse:
    """An SDK ``Message`` as the kernel's :class:`LLMResponse`."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    compaction: dict[str, Any] | None = None
    for block in getattr(message, "content", None) or ():
        kind = getattr(block, "type", None)
        if kind == "compaction" and getattr(block, "content", None):
            # the server compacted the history before this point: sent back verbatim later
            compaction = block.model_dump(mode="json", exclude_none=True)
        elif kind == "text":
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
    return LLMResponse(text="".join(texts), tool_calls=calls, usage=usage,
                       stop_reason=getattr(message, "stop_reason", None),
                       model=getattr(message, "model", None), compaction=compaction)
