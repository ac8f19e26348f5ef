"""The ``openai`` model client: OpenAI's Chat Completions and the servers that speak it.

OpenAI itself, OpenRouter, vLLM, Ollama, llama.cpp's server, LM Studio: ``llm.client: openai``
and the ``openai:`` section of config.yaml (``base_url``, the key's environment variable, extra
headers, context windows). It runs on the official ``openai`` SDK, an optional extra::

    pip install 'hermes-core-kernel[openai]'

Without it the client is still registered (``plugins list`` shows it); building it fails with
that command. The SDK is imported on the first request, as the anthropic client does.

Retries: without a ``timeout`` the SDK's own (``llm.max_retries``, honouring ``retry-after``;
a 401 is never retried); with one, :func:`hermes_core.llm.call_within` bounds the whole call.
Conversions both ways are in :mod:`.convert`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from hermes_core import hookimpl
from hermes_core.kinds import LLMClient, PluginContext
from hermes_core.llm import LLMError, LLMFailure, LLMResponse, call_within, failure_for_status
from hermes_core.netaddr import http_url_problem
from hermes_core.types import Message

from .convert import StreamAssembler, from_completion, to_chat_messages, to_chat_tools

__all__ = ["INSTALL", "OpenAIClient", "OpenAIConfig", "sdk_missing"]

log = logging.getLogger(__name__)

#: the command that installs the SDK this client needs
INSTALL = "pip install 'hermes-core-kernel[openai]'"
#: fields of a model listing entry that give the model's context window, by server
_WINDOW_FIELDS = ("max_model_len",  # vLLM
                  "context_length",  # OpenRouter, LM Studio
                  "context_window")


class OpenAIConfig(BaseModel):
    """The ``openai:`` section of config.yaml."""

    model_config = ConfigDict(extra="forbid")

    #: the endpoint, ending in /v1 (default: OpenAI's, or the OPENAI_BASE_URL variable)
    base_url: str | None = None
    #: the environment variable holding the key; ``null`` for a server that needs none
    #: (Ollama, llama.cpp, vLLM without --api-key)
    api_key_env: str | None = "OPENAI_API_KEY"
    #: the key itself; prefer ``api_key_env`` (a key written here must stay in a 0600 file)
    api_key: SecretStr | None = None
    #: headers sent with every request (OpenRouter's HTTP-Referer and X-Title, a gateway's tag)
    headers: dict[str, str] = Field(default_factory=dict)
    #: model -> context window in tokens; wins over the server's model listing
    context_windows: dict[str, int] = Field(default_factory=dict)
    #: the body field of the answer limit: OpenAI's reasoning models accept only
    #: max_completion_tokens; most other servers only max_tokens
    max_tokens_field: str = Field(default="max_tokens",
                                  pattern="^(max_tokens|max_completion_tokens)$")
    #: ask for usage in streamed answers (stream_options.include_usage); turn off for a server
    #: that rejects the option
    stream_usage: bool = True
    #: models asked without tools (they reject them); the agent then runs without tools
    models_without_tools: list[str] = Field(default_factory=list)

    @field_validator("base_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None  # '' = OpenAI's API (or OPENAI_BASE_URL)
        problem = http_url_problem(value)
        if problem:
            raise ValueError(f"the endpoint (openai.base_url) {problem}")
        return value.strip()


def sdk_missing() -> bool:
    """Whether the openai package cannot be imported here."""
    if "openai" in sys.modules:
        return sys.modules["openai"] is None
    return importlib.util.find_spec("openai") is None


def _not_installed() -> LLMError:
    return LLMError(f"llm.client is 'openai', but the openai package is not installed: {INSTALL}",
                    failure=LLMFailure.NOT_CONFIGURED)


class OpenAIClient(LLMClient):
    """:class:`~hermes_core.kinds.LLMClient` on the official openai SDK (Chat Completions)."""

    name = "openai"
    Config = OpenAIConfig
    description = ("OpenAI's Chat Completions and compatible servers (OpenRouter, vLLM, Ollama, "
                   "llama.cpp, LM Studio); needs the openai extra")

    config: OpenAIConfig

    def __init__(self, config: OpenAIConfig | None, context: PluginContext) -> None:
        if sdk_missing():
            raise _not_installed()
        super().__init__(config or OpenAIConfig(), context)
        llm = context.config.llm
        self.model = llm.model
        self.max_retries = llm.max_retries
        self.timeout = llm.timeout
        self._main_model, self._main_window = llm.model, llm.context_window
        self._client: Any = None
        self._lock = threading.Lock()
        self._listing: dict[str, int | None] | None = None

    # ------------------------------------------------------------------------------ the SDK

    def unavailable(self) -> str | None:
        """No key where one is needed (no network; ``chat`` then exits 3 saying so)."""
        try:
            self.api_key()
        except LLMError:
            return (f"no API key is configured: export {self.config.api_key_env}=... (the "
                    "variable openai.api_key_env names), or set 'api_key_env: null' in the "
                    "openai section for a local server that needs no key")
        return None

    def api_key(self) -> str:
        """The key to send; a placeholder when ``api_key_env`` is null (no key needed)."""
        if self.config.api_key is not None:
            return self.config.api_key.get_secret_value()
        env = self.config.api_key_env
        if env is None:
            return "no-key"  # the SDK needs a string; key-less servers ignore it
        value = os.environ.get(env, "").strip()
        if not value:
            raise LLMError(
                f"no API key for the openai client: set the environment variable {env} "
                "(openai.api_key_env names it), or set 'api_key_env: null' in the openai "
                "section for a local server that needs no key", failure=LLMFailure.NOT_CONFIGURED)
        return value

    @property
    def client(self) -> Any:
        """The ``openai.OpenAI`` client, created on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    key = self.api_key()
                    try:
                        import openai
                    except ImportError:
                        raise _not_installed() from None
                    self._client = openai.OpenAI(
                        api_key=key, base_url=self.config.base_url, max_retries=self.max_retries,
                        timeout=self.timeout, default_headers=dict(self.config.headers) or None)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # ------------------------------------------------------------------------------ calls

    def supports_tools(self, model: str) -> bool:
        return model not in self.config.models_without_tools

    def build_request(self, *, system: str, messages: Sequence[Message], max_tokens: int,
                      model: str | None = None, tools: Sequence[dict[str, Any]] | None = None,
                      stream: bool = False) -> dict[str, Any]:
        """The body this instance would send."""
        name = model or self.model
        body: dict[str, Any] = {"model": name, "messages": to_chat_messages(system, messages),
                                self.config.max_tokens_field: max_tokens}
        if tools and self.supports_tools(name):
            body["tools"] = to_chat_tools(tools)
        if stream:
            body["stream"] = True
            if self.config.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

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
        """One Chat Completions call; streams when ``on_text`` is given.

        Without ``timeout``: ``llm.timeout`` per attempt and the SDK's retries; with it, the
        whole call (retries and back-off included) is bounded by :func:`call_within`.
        """
        request = self.build_request(system=system, messages=messages, max_tokens=max_tokens,
                                     model=model, tools=tools, stream=on_text is not None)
        client = self.client
        if timeout is None:
            return self._attempt(client, request, on_text, None)
        once = client.with_options(max_retries=0)
        return call_within(lambda left: self._attempt(once, request, on_text, left),
                            total=float(timeout), max_retries=self.max_retries,
                            classify=lambda exc: self.classify(exc, request))

    def _attempt(self, client: Any, request: dict[str, Any],
                 on_text: Callable[[str], None] | None, timeout: float | None) -> LLMResponse:
        options = {} if timeout is None else {"timeout": timeout}
        try:
            if on_text is None:
                return from_completion(client.chat.completions.create(**request, **options))
            assembler = StreamAssembler()
            with client.chat.completions.create(**request, **options) as stream:
                for chunk in stream:
                    delta = assembler.feed(chunk)
                    if delta:
                        on_text(delta)
            return assembler.response()
        except LLMError:
            raise
        except Exception as exc:
            raise self.classify(exc, request) from exc

    def classify(self, exc: BaseException, request: dict[str, Any]) -> LLMError:
        """What the SDK raised, as an :class:`LLMError` naming the client, model and fix."""
        if isinstance(exc, LLMError):
            return exc
        import openai

        model, where = request.get("model"), self.config.base_url or "OpenAI's API"
        if isinstance(exc, (openai.APITimeoutError, TimeoutError)):
            return LLMError(f"the openai client's request for model {model} to {where} timed out: "
                            f"{exc}", failure=LLMFailure.TIMEOUT)
        if isinstance(exc, openai.APIConnectionError):
            return LLMError(f"the openai client could not reach {where} (model {model}): {exc}; "
                            "check openai.base_url and that the server runs",
                            failure=LLMFailure.CONNECTION)
        if isinstance(exc, openai.APIStatusError):
            status = int(exc.status_code)
            failure = failure_for_status(status)
            text = f"the openai client got HTTP {status} from {where} for model {model}: {exc.message}"
            if failure is LLMFailure.AUTH:
                env = self.config.api_key_env
                text += (f". Fix: put a valid key in the environment variable {env}" if env else
                         ". Fix: the server wants a key: set openai.api_key_env to the variable "
                         "holding it")
            elif failure is LLMFailure.BAD_REQUEST and request.get("tools") and "tool" in str(
                    exc.message).lower():
                text += (f". Fix: choose a model with tool calling, or add {model} to "
                         "openai.models_without_tools to run it without tools")
            return LLMError(text, failure=failure, status=status)
        if isinstance(exc, openai.APIError):  # e.g. an error event inside a stream
            return LLMError(f"the openai client's call for model {model} failed: {exc}",
                            failure=LLMFailure.SERVER_ERROR)
        return LLMError(f"the openai client's call for model {model} failed: "
                        f"{type(exc).__name__}: {exc}", failure=LLMFailure.OTHER)

    # ------------------------------------------------------------------------------ windows

    def context_window(self, model: str) -> int | None:
        """``openai.context_windows``, else ``llm.context_window`` (for ``llm.model``), else the
        server's model listing where it says (vLLM's max_model_len, OpenRouter's and LM Studio's
        context_length), else ``None``: the kernel then warns, never guesses."""
        if model in self.config.context_windows:
            return self.config.context_windows[model]
        if model == self._main_model and self._main_window is not None:
            return self._main_window
        return self._listed_windows().get(model)

    def _listed_windows(self) -> dict[str, int | None]:
        if self._listing is None:
            found: dict[str, int | None] = {}
            try:
                for entry in self.client.with_options(max_retries=0, timeout=5.0).models.list():
                    found[entry.id] = _window_of(entry)
            except Exception as exc:  # no listing is no window: the kernel warns
                log.debug("the openai client could not list the server's models: %s", exc)
            self._listing = found
        return self._listing


def _window_of(entry: Any) -> int | None:
    extra = dict(getattr(entry, "model_extra", None) or {})
    for key in _WINDOW_FIELDS:
        value = extra.get(key)
        if isinstance(value, int) and value > 0:
            return value
    # llama.cpp's meta.n_ctx_train is the window the model was trained with, not the server's
    # -c: not a window to trust (set openai.context_windows)
    return None


@hookimpl
def register_llm_clients(register: Callable[[type], None]) -> None:
    register(OpenAIClient)
