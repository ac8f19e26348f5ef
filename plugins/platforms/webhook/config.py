"""The ``webhook:`` section of config.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

__all__ = ["MIN_SECRET_CHARS", "SECRET_ENV", "WebhookConfig", "secret_problem"]

#: the environment variable that supplies ``webhook.secret`` (preferred to writing it in the file)
SECRET_ENV = "HERMES_CORE_WEBHOOK_SECRET"
#: a shorter secret is refused: it could be guessed
MIN_SECRET_CHARS = 16


def secret_problem(value: str) -> str | None:
    """What is wrong with ``value`` as the signing secret, or ``None``: the one rule that both
    ``config set``/``config validate`` and ``serve`` apply."""
    if not value:
        return None  # unset: serve says how to set one; config may leave it out
    if value.startswith("whsec_"):
        from .signing import signing_key

        try:
            key = signing_key(value)
        except ValueError as exc:
            return str(exc)
        if len(key) < MIN_SECRET_CHARS:
            return (f"the key in this whsec_ secret is {len(key)} bytes; use at least "
                    f"{MIN_SECRET_CHARS} random ones")
        return None
    if len(value) < MIN_SECRET_CHARS:
        return (f"the webhook secret ({SECRET_ENV} or webhook.secret) is {len(value)} characters; "
                f"use at least {MIN_SECRET_CHARS} random ones (python -c 'import secrets; "
                "print(secrets.token_hex(32))')")
    return None


class WebhookConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the shared HMAC-SHA256 key; the server refuses to start without one (at least 16
    #: characters, or ``whsec_`` and the base64 of at least 16 key bytes)
    secret: SecretStr | None = Field(default=None, json_schema_extra={"env": SECRET_ENV})
    #: the address to listen on; anything but loopback exposes the agent to the network
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    #: requests with a larger body are refused with 413 before they are read
    max_body_bytes: int = Field(default=256 * 1024, ge=1024, le=64 * 1024 * 1024)
    #: a request's signed timestamp may differ from the server's clock by at most this much
    max_skew_seconds: int = Field(default=300, ge=5, le=3600)
    #: a connection must send its request line and headers within this time, or it is closed
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: a request's body must arrive within this time, or it is answered 408 and closed
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    #: connections still sending their headers (not yet signed); past this, the oldest is closed
    max_pending_connections: int = Field(default=64, ge=1, le=100_000)
    #: turns running at once across all conversations (the rest wait their turn)
    max_concurrent_turns: int = Field(default=32, ge=1, le=1024)
    #: messages one conversation may have waiting; more are refused with 429
    max_pending_per_conversation: int = Field(default=8, ge=1, le=1000)
    #: conversations kept live in memory; the one idle longest is closed (and resumed on demand)
    max_live_conversations: int = Field(default=64, ge=1, le=10_000)
    #: a conversation idle this long is closed (its history stays in the archive)
    idle_minutes: float = Field(default=60.0, gt=0, le=7 * 24 * 60)
    #: how long shutdown waits for turns in flight
    shutdown_seconds: int = Field(default=30, ge=0, le=3600)
    #: how long a message's ``webhook-id`` and answer are kept, so that a retry gets the first
    #: answer instead of a second turn (0: no idempotency records)
    idempotency_hours: float = Field(default=24.0, ge=0, le=24 * 90)
    #: where ``send`` (messages the agent starts itself) POSTs, signed like incoming requests
    outbound_url: str | None = None

    @field_validator("outbound_url")
    @classmethod
    def _outbound_endpoint(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None  # '' = no outbound messages
        from hermes_core.netaddr import http_url_problem

        problem = http_url_problem(value)
        if problem:
            raise ValueError(f"the receiver (webhook.outbound_url) {problem}")
        return value.strip()

    @field_validator("secret")
    @classmethod
    def _secret_rule(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            problem = secret_problem(value.get_secret_value())
            if problem:
                raise ValueError(problem)
        return value
