"""The ``webhook:`` section of config.yaml."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr

__all__ = ["SECRET_ENV", "WebhookConfig"]

#: the environment variable that supplies ``webhook.secret`` (preferred to writing it in the file)
SECRET_ENV = "HERMES_CORE_WEBHOOK_SECRET"


class WebhookConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the shared HMAC-SHA256 key; the server refuses to start without one (at least 16 characters)
    secret: SecretStr | None = Field(default=None, json_schema_extra={"env": SECRET_ENV})
    #: the address to listen on; anything but loopback exposes the agent to the network
    host: str = "127.0.0.1"
    port: int = Field(default=8787, ge=0, le=65535)
    #: requests with a larger body are refused with 413 before they are read
    max_body_bytes: int = Field(default=256 * 1024, ge=1024, le=64 * 1024 * 1024)
    #: a request's signed timestamp may differ from the server's clock by at most this much
    max_skew_seconds: int = Field(default=300, ge=5, le=3600)
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
    #: where ``send`` (messages the agent starts itself) POSTs, signed like incoming requests
    outbound_url: str | None = None
