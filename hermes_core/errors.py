"""The exceptions hermes-core raises.

Every error meant for a user derives from :class:`HermesCoreError`; the CLI prints its message and
exits non-zero without a traceback (``--debug`` shows one).
"""

from __future__ import annotations

import enum

__all__ = [
    "ConfigError",
    "HermesCoreError",
    "LLMError",
    "LLMFailure",
    "NotStored",
    "PluginError",
    "PluginLoadError",
    "RegistryError",
    "ToolError",
    "UnknownNameError",
]


class HermesCoreError(Exception):
    """Base class of the errors a user can act on."""


class ConfigError(HermesCoreError):
    """config.yaml is malformed, has an unknown key or a value of the wrong type."""


class PluginError(HermesCoreError):
    """A plugin misbehaved; the message names the plugin and what to do."""


class PluginLoadError(PluginError):
    """A plugin could not be imported or registered (raised only in strict mode)."""


class RegistryError(PluginError):
    """Two plugins registered one name, or a registered class is malformed."""


class UnknownNameError(HermesCoreError):
    """The config names a provider, engine or platform that no loaded plugin registered."""


class ToolError(HermesCoreError):
    """A tool call failed in a way the model should be told about."""


class NotStored(HermesCoreError):
    """Raised by a memory provider's ``on_message`` when the message is neither stored nor kept
    anywhere to be stored later (its database is unreachable and it has no local spool). The
    kernel then fails the turn before the model is called and takes the message out of the
    history, so the sender is told to send it again instead of getting a reply for a message the
    conversation's store never saw."""


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
