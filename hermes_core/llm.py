"""The kernel's model interface: the provider-neutral shapes, failure classes, the retry loop
within a total deadline, and :func:`build_llm`, which builds the client ``llm.client`` selects.

:class:`ChatLLM` is what the agent loop, the compressor's summariser, the curator and the
session archive's summaries depend on: ``complete`` returns text, ``respond`` returns text, tool
calls and usage. The clients themselves are plugins of the ``llm`` kind
(:class:`hermes_core.kinds.LLMClient`, registered through ``register_llm_clients``); tests
inject their own implementation or point a client at a loopback server
(:mod:`hermes_core.testing.messages_api`).

Failures are classified structurally into :class:`LLMFailure` from the SDK's exception types and
HTTP status codes (never by matching message text), so callers can decide per class: the
compressor falls back to a deterministic summary for every class, the agent loop may retry only
transient ones, and an ``AUTH`` failure (a wrong key) is never retried.
"""

from __future__ import annotations

import functools
import importlib
import logging
import random
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from .anthropic_request import (
    apply_cache_breakpoints,
    build_request,
    cache_marker,
    to_anthropic_messages,
)
from .errors import HermesCoreError, LLMError, LLMFailure
from .kinds import LLMClient, PluginContext
from .types import LLMResponse, Message

if TYPE_CHECKING:
    from .config import CoreConfig, LoadedConfig
    from .registry import Registries

__all__ = [
    "LLM",
    "ROLES",
    "ChatLLM",
    "LLMError",
    "LLMFailure",
    "LLMResponse",
    "Role",
    "apply_cache_breakpoints",
    "build_llm",
    "build_request",
    "cache_marker",
    "call_within",
    "client_name",
    "failure_for_status",
    "retry_delay",
    "run_with_deadline",
    "to_anthropic_messages",
]

#: who asks: the main model (the agent loop) or the auxiliary one (summaries, memory reviews)
Role = Literal["main", "auxiliary"]
ROLES: tuple[Role, ...] = ("main", "auxiliary")


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


T = TypeVar("T")


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


def retry_delay(attempt: int, exc: BaseException | None) -> float:
    """Seconds before retry ``attempt + 1``: the server's ``retry-after`` if it sent one (on the
    exception's ``response``, or its cause's), else exponential (0.5 s, 1 s, 2 s, ... up to 8 s)
    with jitter."""
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


def call_within(attempt: Callable[[float], T], *, total: float, max_retries: int,
                classify: Callable[[BaseException], LLMError]) -> T:
    """``attempt(seconds_left)`` retried on transient failures, all within ``total`` seconds.

    Each attempt runs under :func:`run_with_deadline` with the time that is left (so even a
    server dripping one byte at a time cannot hold the caller); back-off
    (:func:`retry_delay`) never sleeps past the deadline; a failure that is not transient
    (``AUTH``, ``BAD_REQUEST``, ...) is raised at once, never retried. What ``attempt`` raises
    other than :class:`LLMError` is turned into one by ``classify``. A client with its own
    SDK calls this with the SDK's retries off.
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
            error, wait = exc, retry_delay(tries, exc)
        except Exception as exc:
            error, wait = classify(exc), retry_delay(tries, exc)
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


# --------------------------------------------------------------------------------------------------
# Building the selected client
# --------------------------------------------------------------------------------------------------


def client_name(core: CoreConfig, role: str) -> tuple[str, str]:
    """``(client name, config key that chose it)`` for ``role``."""
    if role == "auxiliary" and core.llm.auxiliary_client:
        return core.llm.auxiliary_client, "llm.auxiliary_client"
    return core.llm.client, "llm.client"


def build_llm(
    registries: Registries,
    core: CoreConfig,
    role: str = "main",
    *,
    config: LoadedConfig | None = None,
    context: Callable[[str], PluginContext] | None = None,
    home: Path | None = None,
) -> LLMClient:
    """The client ``llm.client`` (role ``main``) or ``llm.auxiliary_client`` (role
    ``auxiliary``, default: the same client) selects, built with its validated section, its
    ``model`` set to ``llm.model`` or ``llm.auxiliary_model`` (default: ``llm.model``).

    ``config`` supplies the client's own section (default: its defaults); ``context(plugin)``
    the :class:`~hermes_core.kinds.PluginContext` (the host passes its own; default: a plain one
    on ``home``). Raises :class:`~hermes_core.errors.UnknownNameError` listing the installed
    clients for an unknown name, :class:`~hermes_core.errors.ConfigError` for an invalid
    section, and :class:`LLMError` when the client cannot start (a missing extra: its message
    names the install command).
    """
    from ._noconfig import NoConfig  # pydantic comes with the first config model, not the import
    from .config import validate_section

    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    name, key = client_name(core, role)
    reg = registries.llm_clients.resolve(name, config_key=key)
    cls: Any = reg.obj
    model_cls = getattr(cls, "Config", NoConfig)
    section = getattr(cls, "config_section", None) or reg.name
    settings = (validate_section(config, section, model_cls, plugin=reg.plugin) if config is not None
                else model_cls.model_validate({}))
    if context is not None:
        ctx = context(reg.plugin)
    else:
        from .paths import home_dir

        ctx = PluginContext(plugin_name=reg.plugin, home=home or home_dir(), config=core,
                            logger=logging.getLogger(f"hermes_core.plugins.{reg.plugin}"))
    try:
        client = cls(settings, ctx)
    except (LLMError, HermesCoreError):
        raise
    except Exception as exc:
        raise LLMError(f"{key}: model client {name!r} (plugin {reg.plugin!r}) failed to start: "
                       f"{type(exc).__name__}: {exc}", failure=LLMFailure.NOT_CONFIGURED) from exc
    model = core.llm.auxiliary_model if role == "auxiliary" else None
    client.model = model or core.llm.model
    return client  # type: ignore[no-any-return]


def __getattr__(name: str) -> Any:
    """``AnthropicLLM``: the old name of the first-party ``anthropic`` client, kept importable."""
    if name == "AnthropicLLM":
        warnings.warn("hermes_core.llm.AnthropicLLM moved to the anthropic client plugin: import "
                      "AnthropicClient from hermes_core.plugins.llm.anthropic, or build the "
                      "configured client with hermes_core.llm.build_llm", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module("hermes_core.plugins.llm.anthropic").AnthropicClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
