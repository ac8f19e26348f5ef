"""The ``honcho`` section of config.yaml, and the Honcho id rules.

Every key has a default except the API key, which the Honcho cloud requires: it comes from the
``HONCHO_API_KEY`` environment variable (preferred; it never lands in a file) or ``honcho.api_key``.
A self-hosted server (any other ``base_url``) may run without one.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from typing import Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

__all__ = ["CLOUD_URL", "ID_RE", "HonchoConfig", "ReasoningLevel", "check_id", "session_id_for",
           "user_peer_id"]

CLOUD_URL = "https://api.honcho.dev"
#: Honcho's rule for the ids a client chooses (workspaces, peers, sessions)
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
ReasoningLevel = Literal["minimal", "low", "medium", "high", "max"]


def check_id(value: str, what: str) -> str:
    """``value`` if it is a valid Honcho id; else ``ValueError`` saying what a valid one is."""
    if not isinstance(value, str) or not ID_RE.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Honcho id: use 1-100 letters, digits, '_' or '-'"
        )
    return value


def session_id_for(hermes_session_id: str, prefix: str = "") -> str:
    """The Honcho session id of a hermes-core session: the same id when it is valid.

    Characters Honcho refuses become ``-`` and a short hash of the original is appended, so two
    different hermes-core ids never share one Honcho session.
    """
    raw = f"{prefix}{hermes_session_id}"
    if ID_RE.match(raw):
        return raw
    digest = hashlib.sha1(raw.encode("utf-8")).hexdigest()[:10]
    cleaned = _BAD_ID_CHARS.sub("-", raw)[:89].strip("-") or "session"
    return f"{cleaned}-{digest}"


def user_peer_id(user: str, prefix: str = "user-") -> str:
    """The Honcho peer of one user key under ``memory.scope: user``: ``<prefix><readable>-<hash>``.

    The readable part is the key with every character Honcho refuses turned into ``_``, cut to 40
    characters; the hash (16 hex digits of SHA-256 of the whole key) is always appended, so two
    keys never share a peer - not keys that clean up alike (``a.b``, ``a@b``), not a 10 kB key,
    not a key crafted to look like another's readable part. At most 77 characters.
    """
    readable = _BAD_ID_CHARS.sub("_", user)[:40].strip("_") or "user"
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{prefix}{readable}-{digest}"


class HonchoConfig(BaseModel):
    """Settings of the Honcho memory provider (config.yaml section ``honcho``)."""

    model_config = ConfigDict(extra="forbid")

    #: the Honcho API: the cloud, or a self-hosted server's base URL (a trailing /v3 is dropped)
    base_url: str = Field(default=CLOUD_URL, json_schema_extra={"env": "HONCHO_BASE_URL"})
    #: Bearer key; required for the cloud. Prefer the environment variable HONCHO_API_KEY
    api_key: SecretStr | None = Field(default=None, json_schema_extra={"env": "HONCHO_API_KEY"})
    #: the Honcho workspace holding this agent's peers and sessions
    workspace: str = "hermes-core"
    #: the peer that stands for the user
    user_peer: str = "user"
    #: the peer that stands for the agent (the observer of the user)
    ai_peer: str = "hermes"
    #: prepended to every Honcho session id (to share a workspace between several agents)
    session_prefix: str = ""
    #: with ``memory.scope: user``, each user key is its own peer: this prefix, the key (cleaned)
    #: and a hash of it (see ``user_peer_id``); ``user_peer`` is then only for sessions without one
    user_peer_prefix: str = "user-"
    #: hybrid: recall injected each turn and the honcho_* tools; context: injection only;
    #: tools: only the tools (no background recall at all)
    recall_mode: Literal["hybrid", "context", "tools"] = "hybrid"
    #: refresh the base context (representation, card, summary) every N turns
    context_cadence: int = Field(default=1, ge=1, le=100)
    #: ask the dialectic every N turns for the injected recall (0: never; the tool still works)
    dialectic_cadence: int = Field(default=1, ge=0, le=100)
    #: an empty result doubles a layer's cadence, up to this factor; a non-empty one resets it
    max_backoff: int = Field(default=8, ge=1, le=64)
    #: reasoning level of the automatic dialectic query
    reasoning_level: ReasoningLevel = "low"
    #: the injected recall is cut to this many characters
    context_chars: int = Field(default=3200, ge=200, le=100_000)
    #: the automatic dialectic answer is cut to this many characters
    dialectic_max_chars: int = Field(default=600, ge=50, le=20_000)
    #: longer messages are stored as several, split at paragraph, sentence or word boundaries
    message_max_chars: int = Field(default=25_000, ge=200, le=1_000_000)
    #: how long the first prefetch of a session may wait for its first recall (seconds); always
    #: kept under the kernel's memory.prefetch_timeout
    first_turn_wait: float = Field(default=0.2, ge=0, le=5)
    #: timeout of one background request (writes, recall refresh), seconds
    timeout: float = Field(default=10.0, gt=0, le=300)
    #: timeout of one request made by a tool the model called, seconds
    tool_timeout: float = Field(default=8.0, gt=0, le=300)
    #: pause before the one retry of a failed write, seconds (a Retry-After header may lengthen it)
    retry_delay: float = Field(default=2.0, ge=0, le=60)
    #: no longer used (accepted so older configs still load): unsent writes already wait in the
    #: outbox, and the kernel's ``memory.worker_drain_timeout`` bounds shutdown
    shutdown_timeout: float = Field(default=5.0, ge=0, le=120)
    #: mirror the file memory's user-profile writes (target "user") as Honcho conclusions
    mirror_memory_writes: bool = True

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value.endswith("/v3"):
            value = value[:-3]
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not an http(s) URL; use {CLOUD_URL} or your server's base URL, "
                "e.g. http://127.0.0.1:8000"
            )
        return value

    @field_validator("workspace", "user_peer", "ai_peer")
    @classmethod
    def _ids(cls, value: str, info: ValidationInfo) -> str:
        return check_id(value, f"honcho.{info.field_name}")

    @field_validator("session_prefix", "user_peer_prefix")
    @classmethod
    def _prefix(cls, value: str, info: ValidationInfo) -> str:
        session = info.field_name == "session_prefix"
        longest, where = (40, "") if session else (20, f"honcho.{info.field_name} ")
        if value and not re.fullmatch(f"[A-Za-z0-9_-]{{1,{longest}}}", value):
            raise ValueError(f"{where}{value!r} may only hold 1-{longest} letters, digits, '_' or '-'")
        return value

    @model_validator(mode="after")
    def _unused_settings(self) -> HonchoConfig:
        # kept for one minor release so older configs load; set, they say so
        for name in sorted({'shutdown_timeout'} & self.model_fields_set):
            warnings.warn(f"honcho.{name} is no longer used (unsent writes wait in the spool file; "
                          "memory.worker_drain_timeout bounds shutdown): remove it from config.yaml",
                          DeprecationWarning, stacklevel=2)
        return self

    @model_validator(mode="after")
    def _cloud_needs_key(self) -> HonchoConfig:
        host = urlsplit(self.base_url).hostname or ""
        if (host == "honcho.dev" or host.endswith(".honcho.dev")) and not (
            self.api_key and self.api_key.get_secret_value().strip()
        ):
            raise ValueError(
                f"the Honcho cloud ({self.base_url}) needs an API key: set the HONCHO_API_KEY "
                "environment variable (or honcho.api_key), or point honcho.base_url at a "
                "self-hosted server"
            )
        if self.user_peer == self.ai_peer:
            raise ValueError(f"user_peer and ai_peer are both {self.user_peer!r}; give them "
                             "different ids")
        return self

    def api_key_value(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key else None
