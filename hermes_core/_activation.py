"""Activation: build the classes the config selects, check their hook implementations and
register the instances with the plugin manager, so their hooks take part in the calls of their
kind; and take them out again.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from ._checks import HookCheck, check_hooks
from ._hookcall import conversation_of
from ._hostbase import HostBase
from ._lanes import DISPOSABLE, Lane, shard_of
from ._preflight import dry_activation, shutdown_quietly
from .errors import ConfigError, PluginError, UnknownNameError
from .hooks import BACKGROUND, ENGINE, MEMORY, PLATFORM
from .hookspecs import create_plugin_manager
from .kinds import PluginContext
from .loader import allowed_names, blocked_names, strict_mode
from .registry import KINDS

if TYPE_CHECKING:
    from .config import LoadedConfig
    from .kinds import RunKind
    from .types import MemoryWrite, Session

__all__ = ["Activation"]

log = logging.getLogger("hermes_core")


class Activation(HostBase):
    """The activation part of :class:`hermes_core.host.PluginHost`."""

    def _section_model(self, section: str, config: LoadedConfig) -> Any:
        return self.registries.section_settings(section, config)

    def plugin_config(self, cls: type) -> Any:
        """The validated config for a registered class (its defaults when its section is absent)."""
        section = getattr(cls, "config_section", None) or cls.name  # type: ignore[attr-defined]
        return self._section_model(section, self.config)

    # ------------------------------------------------------------------------------- activation

    def activate(self, kind: str, name: str, *, config_key: str) -> object:
        """Instantiate the registered class ``name`` of ``kind`` and register the instance.

        The instance's ``@hookimpl`` methods then take part in the hooks of its kind. Returns the
        instance; raises :class:`~hermes_core.errors.PluginError` naming the plugin when the class
        cannot be built or its hook implementations do not match the specs (every problem is
        listed, and recorded on the plugin for ``plugins list``).
        """
        instance, _key, reg_plugin = self._build(kind, name, config_key=config_key, home=self.home)
        return self.add_instance(instance, kind=kind, name=name, plugin=reg_plugin)

    def dry_activation(self) -> tuple[list[str], list[str]]:
        """Build every selected provider, the engine and the tools in a scratch home, as a session
        would, and report (errors, warnings); see :func:`hermes_core._preflight.dry_activation`.
        Nothing is registered on this host and nothing is written to the real home."""
        core = self.config.core
        skipped = {i for i, _name in self.registries.skipped_providers(self.config)}
        wanted = [(MEMORY, name, f"memory.providers[{i}]")
                  for i, name in enumerate(core.memory.providers) if i not in skipped]
        wanted.append((ENGINE, core.context.engine, "context.engine"))
        return dry_activation(wanted, build=self._build, scratch_pm=create_plugin_manager(),
                              registries=self.registries, records=self.records,
                              timeout_of=core.hooks.timeout)

    def add_instance(self, instance: object, *, kind: str, name: str, plugin: str | None = None
                     ) -> object:
        """Register an instance built elsewhere as the ``kind`` named ``name`` (tests, embedding):
        its hooks are checked first, exactly as for an activated one."""
        if kind not in (MEMORY, ENGINE, PLATFORM):
            raise PluginError(f"kind {kind!r} has no instances; use {MEMORY}, {ENGINE} or {PLATFORM}")
        key = f"{kind}:{name}"
        label = f"plugin {plugin or name!r}: {KINDS[kind][1]} {name!r}"
        shutdown_seconds = self.config.core.hooks.timeout(self.hooks.shutdown.__name__)
        if key in self.instances:
            shutdown_quietly(instance, timeout=shutdown_seconds, label=label)
            raise PluginError(
                f"plugin {plugin or name!r}: a {KINDS[kind][1]} named {name!r} is already active "
                "on this host; deactivate() it first, or give the new instance another name")
        problems = self._instance_checks(instance, kind, name, plugin or name)
        if problems:
            shutdown_quietly(instance, timeout=shutdown_seconds, label=label)
            raise PluginError("\n".join(problems))
        try:
            self.pm.register(instance, name=key)
        except (pluggy.PluginValidationError, ValueError) as exc:
            raise PluginError(
                f"plugin {plugin or name!r}: {KINDS[kind][1]} {name!r} has invalid hook "
                f"implementations: {exc}"
            ) from exc
        self._kinds[key] = kind
        self._names[key] = name
        self.instances[key] = instance
        return instance

    def _build(self, kind: str, name: str, *, config_key: str, home: Path
               ) -> tuple[object, str, str]:
        """Construct (not register) the class ``name`` of ``kind``: (instance, manager name, plugin)."""
        reg = self.registries.by_kind(kind).resolve(name, config_key=config_key)
        cls = reg.obj
        context = PluginContext(
            plugin_name=reg.plugin,
            home=home,
            config=self.config.core,
            logger=logging.getLogger(f"hermes_core.plugins.{reg.plugin}"),
            notify_memory_write=functools.partial(self.notify_memory_write, source=name),
            embedder=self.embedder,
            report_problem=functools.partial(self._report_problem, reg.plugin),
            run_later=functools.partial(self._run_later, f"{kind}:{name}", reg.plugin),
            llm=self.llm,
        )
        try:
            instance = cls(config=self.plugin_config(cls), context=context)
        except ConfigError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin {reg.plugin!r}: {KINDS[kind][1]} {name!r} failed to start: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return instance, f"{kind}:{name}", reg.plugin

    def _run_later(self, key: str, plugin: str, fn: Callable[[], None], label: str, *,
                   kind: RunKind = "write", session: Session | None = None) -> bool:
        """``PluginContext.run_later``: ``fn`` on the instance's background lane (``write``) or
        its disposable lane (``disposable``), the shard of ``session``'s conversation (else 0)."""
        if kind not in ("write", "disposable"):
            raise ValueError(f"run_later: kind must be 'write' or 'disposable', not {kind!r}")
        if self._lanes_closed:
            return False
        lanes = self.hooks.engine.lanes
        shard = shard_of(conversation_of({"session": session}), lanes.shards)
        if kind == "write":
            return lanes.get(key, BACKGROUND, shard).submit(fn, label)
        lane = lanes.get(key, DISPOSABLE, shard)
        return lane.submit(functools.partial(_disposable, plugin, lane, fn, label), label)

    def run_later(self, fn: Callable[[], None], label: str, *, plugin: str,
                  kind: RunKind = "write", session: Session | None = None) -> bool:
        """``PluginContext.run_later`` for a plugin module (a plugin with no instance, such as
        one implementing the agent's hooks): ``fn`` on ``plugin``'s lanes, the same two kinds."""
        return self._run_later(plugin, plugin, fn, label, kind=kind, session=session)

    def check_registered(self) -> None:
        """Run the instance checks on every registered class without building it (``plugins
        list``, ``doctor``): a misspelled ``@hookimpl`` makes its plugin's record an error now,
        not only when a session activates it."""
        for kind in (MEMORY, ENGINE, PLATFORM):
            for name, reg in self.registries.by_kind(kind).entries.items():
                self._instance_checks(reg.obj, kind, name, reg.plugin)

    def _instance_checks(self, instance: object, kind: str, name: str, plugin: str) -> list[str]:
        label = f"plugin {plugin!r}: {KINDS[kind][1]} {name!r}"
        checks: list[HookCheck] = check_hooks(instance, kind, self.pm, label=label)
        record = self.records.get(plugin)
        errors = [c.message for c in checks if c.severity == "error"]
        for check in checks:
            if check.severity == "warning":
                log.warning("%s", check.message)
                if record is not None and check.message not in record.warnings:
                    record.warnings.append(check.message)
        if errors and record is not None:
            record.fail("; ".join(errors))
        return errors

    def activate_memory_providers(self) -> list[object]:
        """Activate ``memory.providers``; a provider that fails to start is skipped (and logged).

        pluggy calls the last registered implementation first, so the providers are registered in
        reverse: their hooks then run in ``memory.providers`` order (``tryfirst``/``trylast`` still
        move an implementation). ``instances`` keeps the config order; shutdown runs in reverse.

        Calling it again is safe: a provider already active under its name (an earlier agent's,
        or one added with :meth:`add_instance`) is kept, not built twice; the others are built.
        """
        built: dict[int, object] = {}
        blocked = blocked_names(self.config.core.plugins.disabled)
        allowed = allowed_names(self.config.core.plugins.enabled_only)
        selected = list(enumerate(self.config.core.memory.providers))
        for i, name in reversed(selected):
            active = self.instances.get(f"{MEMORY}:{name}")
            if active is not None:
                built[i] = active
                continue
            try:
                built[i] = self.activate("memory-provider", name, config_key=f"memory.providers[{i}]")
            except UnknownNameError:
                # Disabling a plugin whose provider is selected (the defaults select three) must
                # switch it off, not break every command; a name that is simply unknown still fails.
                normal = re.sub(r"[-_.]+", "-", name).lower()
                outside = allowed is not None and normal not in allowed
                if (normal not in blocked and not outside) or strict_mode():
                    raise
                log.warning("memory provider %r is selected in memory.providers but its plugin is "
                            "disabled; continuing without it (remove it from memory.providers to "
                            "silence this)", name)
            except PluginError as exc:
                log.error("%s; continuing without it", exc)
                if strict_mode():
                    raise
        out = [built[i] for i in sorted(built)]
        keys = [self.pm.get_name(instance) for instance in out]
        others = {k: v for k, v in self.instances.items() if k not in keys}
        self.instances = {**others, **{k: v for k, v in zip(keys, out, strict=True) if k}}
        return out

    def deactivate(self, instance: object) -> None:
        key = self.pm.get_name(instance)
        if key is not None:
            self.pm.unregister(instance)
            self.instances.pop(key, None)
            self._kinds.pop(key, None)
            self._names.pop(key, None)

    def notify_memory_write(self, write: MemoryWrite, source: str | None = None) -> None:
        """Mirror a write to every active memory provider except the one that made it."""
        self.hooks.on_memory_write(write=write, exclude=f"{MEMORY}:{source or write.provider}")


def _disposable(plugin: str, lane: Lane, fn: Callable[[], None], label: str) -> None:
    """Run one disposable job: what it raises is logged once, with its plugin, and goes no
    further (after a shutdown abandoned it, only at DEBUG level: its resources are closing)."""
    try:
        fn()
    except Exception as exc:
        log.log(logging.DEBUG if lane.discarded else logging.ERROR,
                "plugin %r: %s raised %s: %s", plugin, label, type(exc).__name__, exc,
                exc_info=exc)
