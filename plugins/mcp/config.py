"""The ``mcp`` section of config.yaml: the MCP servers whose tools the agent may call, and the
settings of ``hermes-core mcp serve``.

Example::

    mcp:
      call_timeout: 30
      servers:
        files:                      # stdio: hermes-core starts the command
          command: npx
          args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"]
          env: {LOG_LEVEL: warn}
        tracker:                    # streamable HTTP
          url: https://tracker.example/mcp
          headers: {Authorization: "Bearer ${TRACKER_TOKEN}"}

``${NAME}`` in ``env`` and ``headers`` values is replaced by the environment variable ``NAME`` when
the server is started, so secrets stay out of the file.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["SEPARATOR", "SERVER_NAME_RE", "McpConfig", "ServerSpec", "expand_env"]

#: between the server's name and the tool's name in the tool the model sees
SEPARATOR = "__"
#: server names: letters, digits, '-' and single '_' (so ``<server>__<tool>`` splits one way)
SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*(?<!_)$")
_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, *, where: str) -> str:
    """``value`` with each ``${NAME}`` replaced by the environment variable; a missing one is an
    error naming it (never an empty secret sent silently)."""
    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ValueError(f"{where} uses ${{{name}}}, but the environment variable {name} is not set")
        return os.environ[name]

    return _ENV_RE.sub(sub, value)


class ServerSpec(BaseModel):
    """One MCP server: ``command`` (+ ``args``, ``env``, ``cwd``) for stdio, or ``url`` (+
    ``headers``) for streamable HTTP."""

    model_config = ConfigDict(extra="forbid")

    #: as in a client's ``.mcp.json`` (optional: ``command`` or ``url`` already says which)
    type: Literal["stdio", "http", "streamable-http", "sse"] | None = None
    command: str | None = Field(default=None, min_length=1, description="stdio: the program to start")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="stdio: extra environment variables")
    cwd: str | None = None
    url: str | None = Field(default=None, description="streamable HTTP: the server's endpoint")
    headers: dict[str, str] = Field(default_factory=dict)
    #: per-call deadline for this server's tools (seconds); defaults to ``mcp.call_timeout``
    call_timeout: float | None = Field(default=None, gt=0, le=3600)
    #: tools marked parallel-safe (none by default: an MCP tool may have side effects)
    parallel_safe: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_transport(self) -> ServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (a stdio server hermes-core starts) or 'url' "
                             "(a streamable HTTP server), not both and not neither")
        if self.type == "sse":
            raise ValueError("type 'sse' (the older HTTP+SSE transport) is not supported: point "
                             "'url' at the server's streamable HTTP endpoint and set type 'http'")
        if self.type is not None and self.type.replace("streamable-", "") != self.transport:
            given = "'command'" if self.command is not None else "'url'"
            raise ValueError(f"type {self.type!r} does not match {given}: a server with 'command' "
                             "is type 'stdio', one with 'url' is type 'http'")
        if self.url is not None:
            if not re.match(r"^https?://", self.url):
                raise ValueError(f"url {self.url!r} must start with http:// or https://")
            if self.args or self.env or self.cwd:
                raise ValueError("'args', 'env' and 'cwd' are for stdio servers; this one has a 'url'")
        elif self.headers:
            raise ValueError("'headers' are for HTTP servers; this one has a 'command'")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


class McpConfig(BaseModel):
    """Settings of the MCP plugin (section ``mcp``)."""

    model_config = ConfigDict(extra="forbid")

    #: the servers whose tools reach sessions through the ``mcp`` memory provider (so only when
    #: ``mcp`` is in ``memory.providers``: ``config validate`` and ``doctor`` warn otherwise)
    servers: dict[str, ServerSpec] = Field(default_factory=dict,
                                           json_schema_extra={"needs_provider": True})
    #: deadline of one tool call, in seconds (a server may override it)
    call_timeout: float = Field(default=30.0, gt=0, le=3600)
    #: how long starting and listing one server may take, in seconds
    connect_timeout: float = Field(default=20.0, gt=0, le=600)
    #: the most characters of one tool result passed to the model (longer: head and tail kept)
    max_result_chars: int = Field(default=50_000, ge=1000, le=2_000_000)
    #: ``mcp serve --transport http`` demands a bearer token on every request: this environment
    #: variable's value, or else the home's ``mcp-token`` file (created 0600 on first use)
    token_env: str = Field(default="HERMES_CORE_MCP_TOKEN", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: web origins allowed to call the HTTP server (a request with any other ``Origin`` header gets
    #: 403): exact ``scheme://host[:port]`` values; none by default, so no web page can drive it
    allowed_origins: list[str] = Field(default_factory=list)
    #: an HTTP client session without a request for this long is closed, and its archived session
    #: ended (reason ``expired``)
    session_idle_minutes: float = Field(default=30.0, gt=0, le=24 * 60)
    #: the most HTTP client sessions open at once: a new one beyond it gets 503
    max_sessions: int = Field(default=500, ge=1, le=100_000)
    #: a connection must send its request line and headers within this many seconds
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    #: the most connections still sending headers; a new one closes the one waiting longest
    max_pending_connections: int = Field(default=64, ge=1, le=10_000)

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if not re.match(r"^https?://[^/\s]+$", origin):
                raise ValueError(f"allowed origin {origin!r} is not an origin: write "
                                 "scheme://host[:port], e.g. https://app.example or "
                                 "http://localhost:3000 (no path, no trailing '/')")
        return origins

    @field_validator("servers")
    @classmethod
    def _names(cls, servers: dict[str, Any]) -> dict[str, Any]:
        for name in servers:
            if not SERVER_NAME_RE.match(name) or len(name) > 40:
                raise ValueError(
                    f"server name {name!r} is not usable: its tools are named '<server>__<tool>', "
                    "so use 1-40 letters, digits, '-' or single '_' (no '__', no leading or "
                    "trailing '_')")
        return servers
