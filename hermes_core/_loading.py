"""Loading plugins into a host: import what discovery found, register it with the plugin
manager, and file what its registry hooks offer (classes, tools, CLI commands).

Loading never raises for a plugin's fault unless strict mode is on: every failure is kept on the
plugin's :class:`~hermes_core.loader.PluginRecord`, for ``plugins list`` and ``doctor``.
"""

from __future__ import annotations

import logging
from typing import Any

import pluggy

from ._checks import check_hooks
from ._command_table import file_command
from ._hostbase import HostBase
from .deprecations import old_forms
from .errors import PluginError, PluginLoadError, RegistryError
from .hooks import MODULE, HookOutcome
from .loader import (
    ESSENTIAL_PLUGINS,
    Candidate,
    ImportFailure,
    PluginRecord,
    import_candidate,
    is_blocked,
    strict_mode,
)
from .registry import KINDS

__all__ = ["Loading"]

log = logging.getLogger("hermes_core")


class Loading(HostBase):
    """The loading part of :class:`hermes_core.host.PluginHost`."""

    def _load_candidate(self, candidate: Candidate, blocked: set[str],
                        allowed: set[str] | None = None) -> None:
        record = PluginRecord(
            name=candidate.name,
            source=candidate.source,
            distribution=candidate.distribution,
            version=candidate.version,
            module=candidate.module,
            path=str(candidate.path) if candidate.path else None,
        )
        if candidate.name in self.records:
            first = self.records[candidate.name]
            record.enabled = False
            where = candidate.distribution or record.path or candidate.module
            record.fail(
                f"plugin name {candidate.name!r} is already taken by the {first.source} plugin "
                f"from {first.distribution or first.path or first.module}; this {candidate.source} "
                f"plugin ({where}) was not loaded. Rename it or remove one of them"
            )
            self.records[f"{candidate.name} ({candidate.source})"] = record
            self._failed(record)
            return
        self.records[candidate.name] = record
        if is_blocked(candidate, blocked, allowed):
            record.enabled = False
            self.pm.set_blocked(candidate.name)
            if candidate.name in ESSENTIAL_PLUGINS and not is_blocked(candidate, blocked):
                # what the agent loop always did, gone because an allow-list predates it: say so
                record.warnings.append(
                    "off because plugins.enabled_only does not name it (it carries what the "
                    f"agent loop always did); add {candidate.name} to plugins.enabled_only to keep "
                    "it, or to plugins.disabled to turn it off without this warning")
            return
        try:
            obj = import_candidate(candidate)
        except ImportFailure as exc:
            record.fail(str(exc))
            self._failed(record, exc)
            return
        self._register(record, obj)

    def _register(self, record: PluginRecord, obj: object) -> None:
        self.records.setdefault(record.name, record)
        checks = check_hooks(obj, MODULE, self.pm, label=f"plugin {record.name!r}")
        record.warnings.extend(c.message for c in checks if c.severity == "warning")
        errors = [c.message for c in checks if c.severity == "error"]
        if errors:
            record.fail("; ".join(errors))
            self._failed(record)
            return
        try:
            self.pm.register(obj, name=record.name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            record.fail(f"plugin {record.name!r} cannot be registered: {exc}")
            self._failed(record, exc)
            return
        record.hooks = sorted(
            caller.name for caller in self.pm.get_hookcallers(obj) or () if caller.name
        )

    def _check_pending(self) -> None:
        """Catch misspelled hook names, attributing each to its plugin."""
        while True:
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                name = self.pm.get_name(exc.plugin) or "?"
                record = self.records.get(name)
                self.pm.unregister(exc.plugin)
                if record is None:  # pragma: no cover - every registered object has a record
                    raise
                record.fail(
                    f"{exc}. Check the spelling against hermes_core.hookspecs, or mark the "
                    "function @hookimpl(optionalhook=True) if the hook is meant to be optional"
                )
                self._failed(record, exc)

    def _collect_registrations(self, only: str | None = None) -> None:
        """Call the registry hooks (one plugin at a time, in load order) and file what they offer."""
        names = [only] if only is not None else list(self.records)
        for name in names:
            if self.pm.get_plugin(name) is not None:
                self._collect_from(name)
        if only is not None:
            return
        # A disabled plugin was never imported, so what it would register is unknown. Plugins
        # usually register a class named like themselves: when the config asks for such a name,
        # the "unknown name" error suggests enabling the plugin.
        for record in self.records.values():
            if not record.enabled:
                for registry in (
                    self.registries.memory_providers,
                    self.registries.context_engines,
                    self.registries.platforms,
                    self.registries.llm_clients,
                ):
                    registry.disabled_hint.setdefault(record.name, record.name)

    def _collect_from(self, plugin_name: str) -> None:
        """Call one plugin's registry hooks and file what it registers."""
        record = self.records[plugin_name]
        calls = {
            "memory-provider": self.hooks.register_memory_providers,
            "context-engine": self.hooks.register_context_engines,
            "tool": self.hooks.register_tools,
            "platform": self.hooks.register_platforms,
            "embedder": self.hooks.register_embedders,
            "llm-client": self.hooks.register_llm_clients,
        }
        self._collect_commands(record)
        for kind, call in calls.items():
            def register(obj: Any, *, _kind: str = kind) -> None:
                self.registries.by_kind(_kind).add(obj, record.name)
                record.warnings.extend(m for m in old_forms(obj, _kind)
                                       if m not in record.warnings)
                if _kind not in record.kinds:
                    record.kinds.append(_kind)
                record.registers.append(f"{_kind}:{obj.name}")

            for outcome in call(register=register, only=plugin_name):
                self._registry_failure(record, KINDS[kind][0], outcome)

    def _collect_commands(self, record: PluginRecord) -> None:
        """File the click commands a plugin offers through ``register_commands``."""
        def register(command: Any, *, group: str | None = None) -> None:
            spelled = file_command(record.name, command, group=group, commands=self.commands,
                                   subcommands=self.subcommands)
            record.registers.append(f"command:{spelled}")

        hook = self.hooks.register_commands
        for outcome in hook(register=register, only=record.name):
            self._registry_failure(record, hook.__name__, outcome)

    def _registry_failure(self, record: PluginRecord, hook: str, outcome: HookOutcome) -> None:
        """File a registry hook's failure on the plugin: raised, refused or answered a value."""
        exc = outcome.error
        if exc is None:
            return
        record.fail(str(exc) if isinstance(exc, RegistryError)
                    else f"plugin {record.name!r}: {hook} {exc}" if outcome.status == "bad_return"
                    else f"plugin {record.name!r} raised {type(exc).__name__} in {hook}: {exc}")
        self._failed(record, exc)

    def register_plugin(self, name: str, obj: object) -> PluginRecord:
        """Register one more plugin object on a loaded host and collect its registrations.

        How tests and tools add a throwaway plugin; undo with :meth:`unregister_plugin`.
        """
        if name in self.records:
            raise PluginError(f"a plugin named {name!r} is already loaded; pick another name")
        record = PluginRecord(name=name, source="builtin", module=getattr(obj, "__name__", None))
        self.records[name] = record
        self._register(record, obj)
        if record.error is None:
            self._collect_registrations(only=name)
        return record

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin and everything it registered (instances already built stay)."""
        record = self.records.pop(name, None)
        if record is None:
            return
        self.commands = {k: v for k, v in self.commands.items() if v[1] != name}
        self.subcommands = {g: {k: v for k, v in table.items() if v[1] != name}
                            for g, table in self.subcommands.items()}
        if self.pm.get_plugin(name) is not None:
            self.pm.unregister(name=name)
        for kind in KINDS:
            registry = self.registries.by_kind(kind)
            for key in [k for k, reg in registry.entries.items() if reg.plugin == name]:
                del registry.entries[key]

    def _failed(self, record: PluginRecord, exc: BaseException | None = None) -> None:
        log.warning("plugin %s: %s", record.name, record.error)
        if strict_mode():
            raise PluginLoadError(
                f"{record.error} (HERMES_CORE_STRICT_PLUGINS is set, so this is fatal; unset it "
                "to list the failure and keep going)"
            ) from exc
