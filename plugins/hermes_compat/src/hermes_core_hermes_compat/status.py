"""Whether each Hermes plugin found runs here: the data of ``hermes-core hermes plugins`` and of
the bridge's ``doctor`` checks.

Statuses: ``ready``; ``needs service or key`` (its ``is_available()`` is False, or a required
secret is unset); ``needs hermes-agent`` (it imports a part of Hermes the bridge does not
provide); ``failed`` (it does not import or register: the error and the fix are given).
Finding out imports the plugin, so only commands that ask for it do this.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import calls
from .discovery import HermesCandidate, discover
from .loading import HermesLoadError, load
from .settings import missing_secrets

__all__ = ["FAILED", "NEEDS_HERMES", "NEEDS_SERVICE", "READY", "PluginStatus", "status_of",
           "statuses"]

READY = "ready"
NEEDS_SERVICE = "needs service or key"
NEEDS_HERMES = "needs hermes-agent"
FAILED = "failed"


@dataclass
class PluginStatus:
    name: str
    plugin: str
    kind: str
    source: str
    where: str
    status: str
    detail: str = ""
    fix: str = ""
    distribution: str | None = None
    version: str | None = None
    path: str | None = None
    #: registrations of its register(ctx) hermes-core skipped
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def status_of(candidate: HermesCandidate, home: Path) -> PluginStatus:
    out = PluginStatus(name=candidate.name, plugin=candidate.plugin, kind=candidate.kind,
                       source=candidate.source, where=candidate.where, status=READY,
                       distribution=candidate.distribution, version=candidate.version,
                       path=str(candidate.path) if candidate.path else None)
    calls.point_env(home)
    try:
        loaded = load(candidate, calls.hermes_home_for(home, candidate.plugin, None))
    except HermesLoadError as exc:
        out.status = NEEDS_HERMES if exc.status == NEEDS_HERMES else FAILED
        out.detail, out.fix = str(exc), exc.fix
        return out
    out.skipped = list(loaded.unsupported)
    if loaded.engines and not loaded.providers:
        out.kind = "context-engine"
        out.detail = f"context engine: select it with hermes-core config set context.engine {candidate.name}"
        return out
    out.kind = "memory-provider"
    provider = loaded.providers[0]
    method = "is_available"
    try:
        with calls.in_home(calls.hermes_home_for(home, candidate.plugin, None)):
            available = bool(provider.is_available())
            method = "get_config_schema"
            schema_of = getattr(provider, "get_config_schema", None)  # optional
            schema = schema_of() if callable(schema_of) else []
    except Exception as exc:
        out.status, out.detail = FAILED, f"{method}() raised {type(exc).__name__}: {exc}"
        out.fix = "report the error to the plugin's author"
        return out
    unset = missing_secrets(schema, plugin=candidate.plugin)
    if not available or unset:
        from .adapter_memory import unavailable_reason

        out.status = NEEDS_SERVICE
        out.detail = unavailable_reason(provider) if not available else ""
        if unset:
            out.detail = (out.detail + "; " if out.detail else "") + f"unset: {', '.join(unset)}"
            out.fix = f"set {', '.join(unset)} in the environment"
        else:
            out.fix = "configure its service or key (see the plugin's documentation)"
        return out
    out.detail = f"memory provider: add {candidate.name} to memory.providers"
    return out


def statuses(home: Path) -> list[PluginStatus]:
    return [status_of(c, home) for c in discover(home)]
