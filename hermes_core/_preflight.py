"""A session's start, rehearsed: build what the config selects in a scratch home and list every
problem a real start would meet, without registering anything on the host.

``config validate`` and ``doctor`` use it through :meth:`hermes_core.host.PluginHost.dry_activation`
so that a plugin author's mistake (a constructor that raises, a hook implementation that does not
match its spec, a tool name two plugins offer) is named before a session runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pluggy

from ._checks import check_hooks
from ._lanes import run_bounded
from .errors import HermesCoreError
from .hooks import MODULE, Hooks
from .loader import PluginRecord
from .registry import KINDS, Registries

__all__ = ["dry_activation", "shutdown_quietly"]

log = logging.getLogger("hermes_core")

#: builds (not registers) the class ``name`` of ``kind``: (instance, manager name, plugin)
Build = Callable[..., tuple[object, str, str]]


def shutdown_quietly(instance: object, *, timeout: float, label: str) -> None:
    """Call a refused instance's ``shutdown``, if it has one, waiting at most ``timeout`` (the
    shutdown hook's deadline: a hung one must not hold the start it was refused from). The instance
    is registered nowhere, so this is a plain call on a daemon thread, not a hook call; what it
    raises is logged, and so is a late one, which keeps running on its thread."""
    fn = getattr(instance, "shutdown", None)
    if not callable(fn):
        return
    result = run_bounded(fn, timeout, name=f"hermes-shutdown-refused:{label}")
    if result.status == "timed_out":
        log.warning("%s: shutdown of the refused instance did not return within %.1f s; "
                    "going on without waiting for it", label, timeout)
    elif result.status == "error":
        log.debug("%s: shutdown of a refused instance raised", label, exc_info=result.error)


def _registered(instance: object, kind: str, manager_name: str, label: str,
                scratch_pm: pluggy.PluginManager, timeout_of: Callable[[str], float],
                errors: list[str], warnings: list[str]) -> bool:
    """Check a built instance's hooks and register it on ``scratch_pm``; False (its problems
    added to ``errors``, the instance shut down when its hooks are wrong) when it cannot take
    part."""
    checks = check_hooks(instance, kind, scratch_pm, label=label)
    errors += [c.message for c in checks if c.severity == "error"]
    warnings += [c.message for c in checks if c.severity == "warning"]
    if any(c.severity == "error" for c in checks):
        shutdown_quietly(instance, timeout=timeout_of(Hooks.shutdown.__name__), label=label)
        return False
    try:
        scratch_pm.register(instance, name=manager_name)
    except (pluggy.PluginValidationError, ValueError) as exc:
        errors.append(f"{label}: {exc}")
        return False
    return True


def _tool_clashes(scratch: Hooks, registries: Registries) -> list[str]:
    """Tools offered by two plugins (registered or from ``get_tools``), and failing
    ``get_tools`` calls."""
    errors: list[str] = []
    owners: dict[str, list[str]] = {}
    for tool_name, reg in registries.tools.entries.items():
        owners.setdefault(tool_name, []).append(reg.plugin)
    for outcome in scratch.get_tools():
        if not outcome.ok:
            errors.append(f"{outcome.plugin}: get_tools failed: {outcome.error}")
        for tool in outcome.value or ():
            owners.setdefault(tool.name, []).append(outcome.plugin)
    for tool_name, offered_by in sorted(owners.items()):
        if len(offered_by) > 1:
            errors.append(f"tool {tool_name!r} is offered by {' and '.join(map(repr, offered_by))}"
                          ": a session would refuse to start; disable one of them or remove "
                          "one from memory.providers")
    return errors


def dry_activation(
    wanted: Sequence[tuple[str, str, str]],
    *,
    build: Build,
    scratch_pm: pluggy.PluginManager,
    registries: Registries,
    records: Mapping[str, PluginRecord],
    timeout_of: Callable[[str], float],
) -> tuple[list[str], list[str]]:
    """Build each ``(kind, name, config key)`` of ``wanted`` in a scratch home, register it on
    ``scratch_pm`` and report (errors, warnings): constructors that raise, hook implementations
    that do not match the specs, tool names offered twice. Every problem is listed, not only the
    first; every instance built is shut down again."""
    errors: list[str] = []
    warnings: list[str] = []
    kinds: dict[str, str] = {}
    built: list[tuple[str, object]] = []
    plugins: dict[str, None] = {}
    import tempfile  # with shutil and random, a tenth of the kernel's import: only when used

    with tempfile.TemporaryDirectory(prefix="hermes-core-dry-") as tmp:
        for kind, name, key in wanted:
            try:
                instance, manager_name, plugin = build(kind, name, config_key=key, home=Path(tmp))
            except HermesCoreError as exc:
                errors.append(str(exc))
                continue
            label = f"plugin {plugin!r}: {KINDS[kind][1]} {name!r}"
            if _registered(instance, kind, manager_name, label, scratch_pm, timeout_of, errors,
                           warnings):
                kinds[manager_name] = kind
                built.append((manager_name, instance))
                plugins[plugin] = None
        scratch = Hooks(scratch_pm, kind_of=lambda n: kinds.get(n, MODULE), timeout_of=timeout_of)
        errors += _tool_clashes(scratch, registries)
        for plugin in plugins:
            record = records.get(plugin)
            if record is not None:
                warnings += [w for w in record.warnings if w not in warnings]
        for manager_name, _instance in reversed(built):
            scratch.shutdown(only=manager_name)
        scratch.drain(1.0)
        scratch.close()
    return errors, warnings
