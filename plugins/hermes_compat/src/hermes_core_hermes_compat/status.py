"""Whether each Hermes plugin found runs here: the data of ``hermes-core hermes plugins`` and of
the bridge's ``doctor`` checks.

Statuses: ``ready``; ``needs service or key`` (its ``is_available()`` is False, or a required
secret is unset); ``needs hermes-agent`` (it imports a part of Hermes the bridge does not
provide); ``failed`` (it does not import or register: the error and the fix are given).
Finding out imports the plugin, so only commands that ask for it do this; its import,
``register(ctx)`` and provider's ``is_available()``, ``get_config_schema()`` and
``unavailable_reason()`` are each bounded by
``hooks.timeouts.doctor_checks`` (:func:`.loading.bounded`): one that hangs is ``failed``, its
detail saying it hangs and in what.

A provider whose ``initialize`` raised in a session leaves a note in the home
(:func:`note_failure`), removed by its next successful ``initialize``; ``doctor`` shows it, so a
failure seen by a server or an earlier run is named by a later ``doctor`` too.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hermes_core.atomic import atomic_write

from . import calls
from .convert import tool_spec
from .discovery import HermesCandidate, discover
from .general import DELIVERED, skill_tool_name, unmapped_hooks
from .hermes_commands import spelled
from .loading import NEEDS_HERMES, HermesLoadError, Loaded, bounded, deadline, load
from .settings import missing_secrets

__all__ = ["FAILED", "NEEDS_HERMES", "NEEDS_SERVICE", "READY", "PluginStatus", "clear_failure",
           "last_failure", "note_failure", "status_of", "statuses"]

READY = "ready"
NEEDS_SERVICE = "needs service or key"
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
    #: Hermes hooks it registered that hermes-core delivers (:data:`.general.DELIVERED`)
    hooks: list[str] = field(default_factory=list)
    #: Hermes hooks (with the reason) and commands it registered that are not delivered
    unmapped: list[str] = field(default_factory=list)
    #: its ``ctx.register_skill`` skills (shown by the tool ``<plugin>_skill``)
    skills: list[str] = field(default_factory=list)
    #: its slash and CLI commands, as hermes-core runs them (``hermes-core hermes NAME``)
    commands: list[str] = field(default_factory=list)
    #: tools it registered with ``ctx.register_tool``
    tools: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def status_of(candidate: HermesCandidate, home: Path, timeout: float | None = None
              ) -> PluginStatus:
    """``candidate``'s status; each call into it bounded by ``timeout`` (by default
    ``hooks.timeouts.doctor_checks`` of ``home``'s config)."""
    out = PluginStatus(name=candidate.name, plugin=candidate.plugin, kind=candidate.kind,
                       source=candidate.source, where=candidate.where, status=READY,
                       distribution=candidate.distribution, version=candidate.version,
                       path=str(candidate.path) if candidate.path else None)
    calls.point_env(home)
    plugin_home = calls.hermes_home_for(home, candidate.plugin, None)
    timeout = deadline(home) if timeout is None else timeout
    try:
        loaded = load(candidate, plugin_home, timeout=timeout)
        own = bounded(candidate, "get_tool_schemas()", timeout, plugin_home,
                      lambda: _provider_tool_names(loaded.providers[:1], plugin_home))
        asking = ["is_available()"]  # then get_config_schema(): the one hung is named
        answers = (bounded(candidate, asking, timeout, plugin_home,
                           lambda: _ask_provider(loaded.providers[0], plugin_home, asking))
                   if loaded.providers else None)
        reason = ""
        if isinstance(answers, tuple) and not answers[0]:
            from .adapter_objects import unavailable_reason

            provider = loaded.providers[0]
            reason = bounded(candidate, "unavailable_reason()", timeout, plugin_home,
                             lambda: unavailable_reason(provider))
    except HermesLoadError as exc:
        out.status = NEEDS_HERMES if exc.status == NEEDS_HERMES else FAILED
        out.detail, out.fix = str(exc), exc.fix
        return out
    _note_registrations(out, loaded, candidate.plugin)
    if loaded.engines and not loaded.providers:
        out.kind = "context-engine"
        out.detail = f"context engine: select it with hermes-core config set context.engine {candidate.name}"
        return out
    out.kind = "memory-provider"
    if not loaded.providers:  # hooks and tools only: it acts through a provider slot
        out.kind = "general"
        out.detail = (f"general plugin (hooks, tools): add {candidate.name} to memory.providers "
                      "to run them")
        return out
    # a register_tool of a name its provider offers is the provider's tool (see get_tools)
    out.tools = [tool for tool in out.tools if tool not in own]
    if isinstance(answers, str) or answers is None:
        out.status, out.detail = FAILED, answers or ""
        out.fix = "report the error to the plugin's author"
        return out
    available, schema = answers
    unset = missing_secrets(schema, plugin=candidate.plugin)
    if not available or unset:
        _needs_service(out, reason, available, unset)
        return out
    out.detail = f"memory provider: add {candidate.name} to memory.providers"
    return out


def _note_registrations(out: PluginStatus, loaded: Loaded, plugin: str) -> None:
    """Fill ``out``'s hooks, commands, tools and skills from what ``register(ctx)`` did."""
    out.skipped = list(loaded.unsupported)
    registered = loaded.registered
    out.hooks = [name for name in registered.hooks if name in DELIVERED]
    out.unmapped = unmapped_hooks(registered) + [f"{r} (refused)" for r in loaded.refused]
    out.commands = [spelled(c.kind, c.name) for c in registered.commands]
    out.tools = [tool.name for tool in registered.tools]
    if registered.skills:
        out.tools.append(skill_tool_name(plugin))
        out.skills = [skill.name for skill in registered.skills]


def _provider_tool_names(providers: list[Any], plugin_home: Path) -> set[str]:
    """The names of the tools the provider (``providers``' one, if any) offers itself (empty
    when asking it fails)."""
    own: set[str] = set()
    try:
        with calls.in_home(plugin_home):
            for schema in [s for p in providers for s in p.get_tool_schemas() or []]:
                with contextlib.suppress(ValueError, TypeError):
                    own.add(tool_spec(schema)[0])
    except Exception:
        own = set()
    return own


def _ask_provider(provider: Any, plugin_home: Path, asking: list[str]) -> tuple[bool, Any] | str:
    """``(is_available(), config schema)`` of ``provider``; what failed when either call
    raised. ``asking[0]`` is set to the call under way."""
    method = "is_available"
    try:
        with calls.in_home(plugin_home):
            available = bool(provider.is_available())
            method = "get_config_schema"
            asking[0] = "get_config_schema()"
            schema_of = getattr(provider, "get_config_schema", None)  # optional
            schema = schema_of() if callable(schema_of) else []
    except Exception as exc:
        return f"{method}() raised {type(exc).__name__}: {exc}"
    return available, schema


def _needs_service(out: PluginStatus, reason: str, available: bool, unset: list[str]) -> None:
    """Mark ``out`` as waiting for its service (not available: ``reason``, its
    ``unavailable_reason()``) or for the ``unset`` secrets."""
    out.status = NEEDS_SERVICE
    out.detail = reason if not available else ""
    if unset:
        out.detail = (out.detail + "; " if out.detail else "") + f"unset: {', '.join(unset)}"
        out.fix = f"set {', '.join(unset)} in the environment"
    else:
        out.fix = "configure its service or key (see the plugin's documentation)"


def statuses(home: Path) -> list[PluginStatus]:
    """Every plugin's status; a command whose name is the ``hermes`` group's own or another
    plugin's is moved from ``commands`` to ``unmapped``, refused, naming both."""
    from .commands import hermes_group

    timeout = deadline(home)
    found = [status_of(c, home, timeout) for c in discover(home)]
    owners: dict[str, list[str]] = {
        spelled("cli", name): ["hermes-core itself"] for name in hermes_group.commands}
    for s in found:
        for command in s.commands:
            owners.setdefault(command, []).append(f"Hermes plugin {s.plugin!r}")
    for s in found:
        clashing = [c for c in s.commands if len(owners[c]) > 1]
        s.commands = [c for c in s.commands if c not in clashing]
        s.unmapped += [f"{c} (command refused: the name is claimed by "
                       f"{' and by '.join(owners[c])})" for c in clashing]
    return found


def _failure_file(home: Path, plugin: str) -> Path:
    safe = calls.hermes_home_for(home, plugin, None).name  # the plugin's name, file-safe
    return calls.compat_root(home) / ".failures" / f"{safe}.json"


def note_failure(home: Path, plugin: str, message: str) -> None:
    """Keep the last failed ``initialize`` of ``plugin`` for ``doctor``."""
    path = _failure_file(home, plugin)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"message": message, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write(path, json.dumps(record).encode("utf-8"))


def clear_failure(home: Path, plugin: str) -> None:
    _failure_file(home, plugin).unlink(missing_ok=True)


def last_failure(home: Path, plugin: str) -> str | None:
    """The note of :func:`note_failure` as a sentence, or None."""
    try:
        record = json.loads(_failure_file(home, plugin).read_text(encoding="utf-8"))
        return f"initialize() failed at {record['at']}: {record['message']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None
