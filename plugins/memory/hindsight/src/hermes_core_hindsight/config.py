"""The ``hindsight`` section of config.yaml, validated by :class:`HindsightConfig`.

Every key has a default that works against a server on this machine (``hindsight-api`` listening on
127.0.0.1:8888), so a user who only adds ``hindsight`` to ``memory.providers`` gets a working
setup. The API key is read from the environment (``HINDSIGHT_API_KEY``) and is a secret: the kernel
redacts it in ``config show`` and in validation errors.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = ["FACT_TYPES", "Budget", "FactType", "HindsightConfig", "user_bank"]

FactType = Literal["world", "experience", "observation"]
Budget = Literal["low", "mid", "high"]
#: what the server stores: world facts, the agent's own experiences, and (only when the server has
#: an LLM) observations consolidated from them
FACT_TYPES: tuple[FactType, ...] = ("world", "experience", "observation")

# Bank ids go into URL paths; keep them to characters that need no escaping anywhere.
_BANK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
_TAG_RE = re.compile(r"^[^\s,]{1,128}$")
_NOT_BANK_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
#: the readable part of a user's bank id is cut to this many characters (the hash keeps it unique)
_USER_PART = 40


def user_bank(bank: str, user: str) -> str:
    """The bank of one user under ``memory.scope: user``: ``<bank>.user.<readable>.<hash>``.

    The readable part is the user key with every character outside ``[A-Za-z0-9_-]`` turned into
    ``_`` and cut to 40 characters; the hash (16 hex digits of SHA-256 of the whole key) is always
    there, so two keys never share a bank, whatever they contain or however long they are (a key
    crafted to look like another's readable part still hashes differently). The result always
    passes the bank id rule (at most 128 characters).
    """
    readable = _NOT_BANK_CHARS.sub("_", user)[:_USER_PART].strip("_") or "user"
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{bank[:64]}.user.{readable}.{digest}"


class HindsightConfig(BaseModel):
    """Settings of the Hindsight memory provider (the ``hindsight`` section)."""

    model_config = ConfigDict(extra="forbid")

    #: where hindsight-api listens (scheme, host, port; no path); env HINDSIGHT_BASE_URL
    base_url: str = Field(default="http://127.0.0.1:8888",
                          json_schema_extra={"env": "HINDSIGHT_BASE_URL"})
    #: sent as ``Authorization: Bearer <key>``; env HINDSIGHT_API_KEY (prefer it to the file)
    api_key: SecretStr | None = Field(default=None, json_schema_extra={"env": "HINDSIGHT_API_KEY"})
    #: the memory bank turns are retained in and recalled from (created by the server on first use)
    bank: str = "hermes"

    #: retain each completed turn in the background
    auto_retain: bool = True
    #: prepare a recall after each turn and add it to the next user message
    auto_recall: bool = True
    #: hand retains to the server's own queue (``async``, kept in its database) instead of waiting
    #: while it extracts facts; each turn carries an operation id, so a retry after a lost answer
    #: is a no-op on the server rather than a duplicate
    retain_async: bool = True
    #: extra tags on every retained turn (besides session, lineage and platform tags)
    tags: list[str] = Field(default_factory=list, max_length=32)
    #: a turn longer than this (characters) is sent as several items of the same document
    retain_item_chars: int = Field(default=20_000, ge=1_000, le=1_000_000)
    #: a turn longer than this (characters) is retained with its middle cut out (a pasted log of a
    #: megabyte costs the server minutes of embedding and is of little use to recall; the whole
    #: turn stays in the session archive)
    retain_max_chars: int = Field(default=60_000, ge=1_000, le=10_000_000)
    #: attempts per retain before it is set aside in the spool file (retried later)
    retain_attempts: int = Field(default=3, ge=1, le=10)
    #: no longer used (accepted so older configs still load): there is no queue in memory, every
    #: turn is kept in the spool file before it is sent
    max_queued_turns: int = Field(default=500, ge=1, le=100_000)

    #: fact types to recall; empty means "what the server has": observations when its
    #: ``/version`` says they are enabled, plus world and experience facts
    recall_types: list[FactType] = Field(default_factory=list)
    #: how much work the server spends on a recall
    recall_budget: Budget = "mid"
    #: the server's token budget for recall results
    recall_max_tokens: int = Field(default=2048, ge=64, le=65_536)
    #: memories added to a user message at most
    prefetch_max_results: int = Field(default=6, ge=1, le=50)
    #: characters of recalled text added to a user message at most
    prefetch_max_chars: int = Field(default=2_000, ge=200, le=50_000)
    #: when the prepared recall answers another query, prefetch may ask the server for this one
    #: and wait this long (seconds; 0 turns it off). Always kept below memory.prefetch_timeout.
    prefetch_live_wait: float = Field(default=0.2, ge=0, le=5)
    #: leave out memories of the current session (they are already in the conversation)
    recall_skip_current_session: bool = True

    #: seconds to wait for the TCP connection to the server
    connect_timeout: float = Field(default=2.0, gt=0, le=60)
    #: seconds a recall may take (tools and background recalls)
    recall_timeout: float = Field(default=5.0, gt=0, le=300)
    #: seconds a retain may take (a server with an LLM extracts facts while you wait)
    retain_timeout: float = Field(default=30.0, gt=0, le=600)
    #: seconds a reflect may take (the server's LLM reasons over many memories)
    reflect_timeout: float = Field(default=60.0, gt=0, le=600)
    #: how long a session end waits for a background send (of mirrored notes, or of the spool
    #: while the server was failing)
    switch_flush_timeout: float = Field(default=5.0, ge=0, le=120)
    #: no longer used (accepted so older configs still load): unsent turns already wait in the
    #: spool file, and the kernel's ``memory.worker_drain_timeout`` bounds shutdown
    shutdown_timeout: float = Field(default=10.0, ge=0, le=300)

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"{value!r} is not an http(s) URL; write it like http://127.0.0.1:8888")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError(
                f"{value!r} has a path or query; give only scheme, host and port (the client adds "
                "/v1/default/...), e.g. http://127.0.0.1:8888")
        try:
            parts.port  # noqa: B018 - raises ValueError for a port out of range
        except ValueError as exc:
            raise ValueError(f"{value!r}: {exc}") from None
        return f"{parts.scheme}://{parts.netloc}"

    @field_validator("bank")
    @classmethod
    def _check_bank(cls, value: str) -> str:
        if not _BANK_RE.match(value):
            raise ValueError(
                f"bank {value!r} is invalid: use 1-128 letters, digits, '_', '.', ':' or '-', "
                "starting with a letter or digit")
        return value

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, value: list[str]) -> list[str]:
        bad = [t for t in value if not _TAG_RE.match(t)]
        if bad:
            raise ValueError(f"tags {bad!r} are invalid: a tag is 1-128 characters without spaces "
                             "or commas")
        return value

    @field_validator("recall_types")
    @classmethod
    def _no_duplicate_types(cls, value: list[FactType]) -> list[FactType]:
        if len(set(value)) != len(value):
            raise ValueError(f"recall_types lists a type twice: {value}")
        return value

    @model_validator(mode="after")
    def _unused_settings(self) -> HindsightConfig:
        # kept for one minor release so older configs load; set, they say so
        for name in sorted({'max_queued_turns', 'shutdown_timeout'} & self.model_fields_set):
            warnings.warn(f"hindsight.{name} is no longer used (unsent writes wait in the spool file; "
                          "memory.worker_drain_timeout bounds shutdown): remove it from config.yaml",
                          DeprecationWarning, stacklevel=2)
        return self

    @model_validator(mode="after")
    def _timeouts_agree(self) -> HindsightConfig:
        if self.connect_timeout > self.recall_timeout:
            raise ValueError(
                f"connect_timeout ({self.connect_timeout}) is longer than recall_timeout "
                f"({self.recall_timeout}); lower connect_timeout or raise recall_timeout")
        return self

    def bearer(self) -> str | None:
        """The API key in clear, for the Authorization header only."""
        return self.api_key.get_secret_value() if self.api_key is not None else None
