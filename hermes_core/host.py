"""The plugin host: one pluggy PluginManager, the plugins loaded into it, and isolated hook calls.

There is no module-global manager: :meth:`PluginHost.load` builds a fresh one (tests build as many
as they like). Loading never raises for a plugin's fault unless strict mode is on; every failure is
kept in :attr:`PluginHost.records` and shown by ``hermes-core plugins list`` and ``doctor``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from ._checks import HookCheck, check_hooks
from ._markers import PROJECT_NAME
from ._preflight import dry_activation, shutdown_quietly
from .config import (
    LoadedConfig,
    load_config,
)
from .deprecations import old_forms
from .errors import (
    ConfigError,
    PluginError,
    PluginLoadError,
    RegistryError,
    UnknownNameError,
)
from .hooks import BACKGROUND, ENGINE, MEMORY, MODULE, PLATFORM, HookOutcome, Hooks
from .kinds import PluginContext, Tool
from .loader import (
    Candidate,
    ImportFailure,
    PluginRecord,
    allowed_names,
    blocked_names,
    discover,
    import_candidate,
    is_blocked,
    strict_mode,
)
from .paths import home_dir, plugins_dir
from .registry import KINDS, Registries
from .types import MemoryWrite

__all__ = ["COMMAND_GROUPS", "RESERVED_COMMANDS", "HookOutcome", "PluginHost",
           "create_plugin_manager"]

#: the kernel's own sub-commands, which no plugin may register
RESERVED_COMMANDS = frozenset({"chat", "config", "doctor", "eval", "forget", "import", "plugins",
                               "replay", "serve", "storage"})
#: the kernel's command groups plugins add sub-commands to: ``register(command, group="import")``
#: makes ``hermes-core import NAME``
COMMAND_GROUPS = frozenset({"import"})

log = logging.getLogger("hermes_core")


def create_plugin_manager() -> pluggy.PluginManager:
    """A new PluginManager with every hermes-core hookspec added and nothing registered."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


if TYPE_CHECKING:
    from .kinds import LLMClient
    from .storage.erasures import ErasureLedger

#: closed child hosts a host keeps for reuse (see :meth:`PluginHost.child_host`)
_SPARE_CHILDREN = 4
#: seconds a read of the erasure generation is reused (one turn's dispatcher and prefetch)
_ERASURES_FRESH = 0.005


class PluginHost:
    """Plugins loaded into a PluginManager, their registries, and the instances in use."""

    def __init__(self, pm: pluggy.PluginManager, home: Path, config: LoadedConfig) -> None:
        self.pm = pm
        self.home = home
        self.config = config
        self.records: dict[str, PluginRecord] = {}
        self.registries = Registries()
        #: activated instances, by their manager name ("memory-provider:file_memory", ...)
        self.instances: dict[str, object] = {}
        #: set once shutdown has drained the lanes: ``run_later`` then refuses new work
        self._lanes_closed = False
        self._embedder: Any = None
        self._embedder_chosen = False
        self._embedder_lock = threading.Lock()
        self._llms: dict[str, Any] = {}
        self._llm_lock = threading.Lock()
        #: CLI commands offered by plugins: name -> (click command, plugin)
        self.commands: dict[str, tuple[Any, str]] = {}
        #: sub-commands of the kernel's groups (COMMAND_GROUPS): group -> name -> (command, plugin)
        self.subcommands: dict[str, dict[str, tuple[Any, str]]] = {}
        #: the kind of each registered instance, by manager name (modules are not listed)
        self._kinds: dict[str, str] = {}
        #: the registered name of each instance (``file_memory``), by manager name
        self._names: dict[str, str] = {}
        #: every kernel call of a hook goes through this typed facade
        self.hooks = Hooks(pm, kind_of=self.kind_of, timeout_of=config.core.hooks.timeout)
        #: the stores' erasure generation last read by :meth:`heed_erasures` (None: not yet)
        self.erasures_seen: int | None = None
        self._erasures: ErasureLedger | None = None
        self._erasures_read_at = 0.0
        self._erasures_lock = threading.Lock()
        #: the host this one was made from by :meth:`child_host` (None for a loaded host)
        self.parent: PluginHost | None = None
        #: closed child hosts kept for the next delegation (building one registers every plugin
        #: again), with the registrations they were built from
        self._spare_children: list[tuple[tuple[tuple[str, int], ...], PluginHost]] = []
        self._spare_lock = threading.Lock()
        self._spare_signature: tuple[tuple[str, int], ...] = ()
        self._closed = False

    def heed_erasures(self) -> int | None:
        """Read the stores' erasure generation (:mod:`hermes_core.storage.erasures`); when it
        moved since the last read, call ``on_erasure`` (once per change, whoever reads it).
        Returns the generation, or ``None`` when it cannot be read (logged). A read within the
        last few milliseconds is reused, so the dispatcher and the prefetch runner of one turn
        pay for one."""
        now = time.monotonic()
        with self._erasures_lock:
            if self.erasures_seen is not None and now - self._erasures_read_at < _ERASURES_FRESH:
                return self.erasures_seen
            if self._erasures is None:
                from .storage import resolve_storage_url
                from .storage.erasures import ErasureLedger

                url = resolve_storage_url(self.config.core.storage.url)
                self._erasures = ErasureLedger(self.home, url)
            ledger = self._erasures
        from .storage.erasures import ErasureRecordError

        try:
            generation: int = ledger.current()
        except ErasureRecordError as exc:
            log.error("%s; live conversations are kept as they are until it can be read", exc)
            return None
        with self._erasures_lock:
            moved = self.erasures_seen is not None and generation != self.erasures_seen
            self.erasures_seen = generation
            self._erasures_read_at = time.monotonic()
        if moved:
            log.info("the stores' erasure generation is now %d: dropping what plugins keep in "
                     "memory; live conversations are rebuilt from the stores", generation)
            self.hooks.on_erasure(generation=generation)
        return generation

    def embedder(self) -> Any:
        """The embedder ``embeddings.embedder`` selects, built once (thread-safe) and guarded;
        ``None`` when semantic search is off or nothing can run (a warning says why)."""
        if self.parent is not None:
            return self.parent.embedder()
        with self._embedder_lock:
            if self._embedder_chosen:
                return self._embedder
            self._embedder_chosen = True
            from .embeddings import select_embedder
            from .kinds import EmbedderUnavailable

            try:
                self._embedder, why = select_embedder(self.registries, self.config.core, self.home,
                                                      self.config.raw)
            except (UnknownNameError, EmbedderUnavailable) as exc:
                log.warning("semantic search is off: %s", exc)
                self._embedder = None
            else:
                log.info("embeddings: %s", why)
            return self._embedder

    def llm(self, role: str = "main") -> LLMClient:
        """The model client of ``role`` (``main``: ``llm.client``, ``auxiliary``:
        ``llm.auxiliary_client``), built once per host (thread-safe) and closed with it.
        Raises like :func:`hermes_core.llm.build_llm` (an unknown name lists the installed ones)."""
        if self.parent is not None:
            return self.parent.llm(role)
        with self._llm_lock:
            client = self._llms.get(role)
            if client is None:
                from .llm import build_llm

                client = build_llm(self.registries, self.config.core, role, config=self.config,
                                   context=self._llm_context)
                self._llms[role] = client
            return client  # type: ignore[no-any-return]

    def _llm_context(self, plugin: str) -> PluginContext:
        return PluginContext(plugin_name=plugin, home=self.home, config=self.config.core,
                             logger=logging.getLogger(f"hermes_core.plugins.{plugin}"),
                             report_problem=functools.partial(self._report_problem, plugin),
                             llm=self.llm)

    def kind_of(self, manager_name: str) -> str:
        """``memory-provider``, ``context-engine``, ``platform``, or ``module`` for plugin modules."""
        return self._kinds.get(manager_name, MODULE)

    def instance_name(self, manager_name: str) -> str:
        """The name an instance was activated as (the one users put in the config: a provider's
        ``file_memory`` for its manager name); a plugin module's name is returned as it is."""
        return self._names.get(manager_name, manager_name)

    @property
    def engine_name(self) -> str | None:
        """The name of the active context engine, if any."""
        for key, kind in self._kinds.items():
            if kind == ENGINE:
                return self._names.get(key)
        return None

    @property
    def engine(self) -> object | None:
        """The active context engine instance, if any."""
        for key, kind in self._kinds.items():
            if kind == ENGINE:
                return self.instances.get(key)
        return None

    def providers(self) -> dict[str, object]:
        """Active memory providers by their manager name, in activation order."""
        return {k: v for k, v in self.instances.items() if self._kinds.get(k) == MEMORY}

    def platforms(self) -> dict[str, object]:
        """Active platform adapters by their manager name."""
        return {k: v for k, v in self.instances.items() if self._kinds.get(k) == PLATFORM}

    # ---------------------------------------------------------------------------------- loading

    @classmethod
    def load(
        cls,
        home: Path | None = None,
        *,
        config: LoadedConfig | None = None,
        builtins: bool = True,
        entry_points: bool = True,
        directories: bool = True,
        plugins: Iterable[tuple[str, object]] = (),
    ) -> PluginHost:
        """Discover, import and register plugins; collect their registrations.

        ``plugins`` registers extra in-memory plugins (name, object) after the others — how tests
        add throwaway plugins. Disabled names are applied before anything is imported.
        """
        home = home or home_dir()
        config = config if config is not None else load_config(home)
        host = cls(create_plugin_manager(), home, config)
        blocked = blocked_names(config.core.plugins.disabled)
        allowed = allowed_names(config.core.plugins.enabled_only)
        candidates = discover(
            plugins_dir(home) if directories else None, builtins=builtins, entry_point=entry_points
        )
        for candidate in candidates:
            host._load_candidate(candidate, blocked, allowed)
        for name, obj in plugins:
            record = PluginRecord(name=name, source="builtin", module=getattr(obj, "__name__", None))
            host._register(record, obj)
        host._check_pending()
        host._collect_registrations()
        return host

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
            import click

            if not isinstance(command, click.Command) or not command.name:
                raise RegistryError(
                    f"plugin {record.name!r}: register_commands got {command!r}; register a "
                    "click.Command or click.Group that has a name")
            name = command.name
            if group is not None and group not in COMMAND_GROUPS:
                raise RegistryError(
                    f"plugin {record.name!r} registers {name!r} under {group!r}, which is not "
                    f"a kernel command group (those are: {', '.join(sorted(COMMAND_GROUPS))})")
            if group is None and name in RESERVED_COMMANDS:
                raise RegistryError(
                    f"plugin {record.name!r} registers the command {name!r}, which is the "
                    "kernel's own; rename the plugin's command")
            table = self.commands if group is None else self.subcommands.setdefault(group, {})
            spelled = name if group is None else f"{group} {name}"
            owner = table.get(name)
            if owner is not None:
                raise RegistryError(
                    f"command {spelled!r} is registered by both {owner[1]!r} and "
                    f"{record.name!r}; {owner[1]!r} keeps it. Disable one of them or rename one "
                    "command")
            table[name] = (command, record.name)
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

    # ----------------------------------------------------------------------------------- config

    def config_problems(self, config: LoadedConfig | None = None) -> list[tuple[str, str]]:
        """(key, message) for each problem of plugin sections and selections; empty when valid."""
        return self.registries.config_problems(config or self.config)

    def validate_config(self, config: LoadedConfig | None = None) -> None:
        """Check plugin sections and selections against what is loaded; raise ConfigError."""
        problems = self.config_problems(config)
        if problems:
            raise ConfigError("\n".join(message for _key, message in problems))

    def validate_change(self, before: LoadedConfig, after: LoadedConfig) -> None:
        """Refuse ``after`` if it has a problem ``before`` did not have.

        Problems that were already there (say, the default engine's plugin is not installed) do not
        block an unrelated change; they are reported by ``config validate`` and ``doctor``.
        """
        known = {key for key, _msg in self.config_problems(before)}
        new = [msg for key, msg in self.config_problems(after) if key not in known]
        if new:
            raise ConfigError("\n".join(new) + "\nconfig.yaml was not changed.")

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
        wanted = [(MEMORY, name, f"memory.providers[{i}]")
                  for i, name in enumerate(core.memory.providers)]
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
            run_later=functools.partial(self._run_later, f"{kind}:{name}"),
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

    def _run_later(self, key: str, fn: Callable[[], None], label: str) -> bool:
        """``PluginContext.run_later``: ``fn`` on the instance's background lane, shard 0."""
        if self._lanes_closed:
            return False
        return self.hooks.engine.lanes.get(key, BACKGROUND, 0).submit(fn, label)

    def _report_problem(self, plugin: str, message: str) -> None:
        """An instance's non-fatal problem: logged, kept on its plugin's record (once)."""
        log.warning("plugin %s: %s", plugin, message)
        record = self.records.get(plugin)
        if record is not None and message not in record.warnings:
            record.warnings.append(message)

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

    def child_host(self) -> PluginHost:
        """A host for a delegated child agent: a plugin manager of its own holding this host's
        plugin modules and active memory providers (the same objects, in the same order) and a
        new instance of the active context engine, so the child's compactions and token counts
        never touch the parent's engine. Close it with :meth:`close_child`; the providers stay
        this host's (their ``shutdown`` is not called)."""
        shared = [(key, obj) for key, obj in self.pm.list_name_plugin()
                  if obj is not None and self._kinds.get(key) not in (ENGINE, PLATFORM)]
        signature = tuple((key, id(obj)) for key, obj in shared)
        child: PluginHost | None = None
        with self._spare_lock:
            for i, (sig, _spare) in enumerate(self._spare_children):
                if sig == signature:
                    child = self._spare_children.pop(i)[1]
                    break
        if child is None:
            child = PluginHost(create_plugin_manager(), self.home, self.config)
            child.parent = self
            child.records, child.registries = self.records, self.registries
            for key, obj in shared:
                child.pm.register(obj, name=key)
                if key in self._kinds:
                    child._kinds[key], child._names[key] = self._kinds[key], self._names[key]
            child.instances = {k: v for k, v in self.instances.items() if k in child._kinds}
            child._spare_signature = signature
        name = self.engine_name
        if name is not None:
            child.activate(ENGINE, name, config_key="context.engine")
        return child

    def close_child(self, drain_timeout: float) -> list[str]:
        """Close a :meth:`child_host`: wait (within ``drain_timeout``) for its late calls, shut
        down the engine it built, unregister everything; the shared providers keep running."""
        if self.parent is None:
            raise RuntimeError("close_child() is for a host made by child_host(); use shutdown()")
        busy = self.hooks.drain(drain_timeout)
        for key, kind in list(self._kinds.items()):
            if kind == ENGINE:
                self.hooks.shutdown(only=key)
                self.deactivate(self.instances[key])
        parent = self.parent
        with parent._spare_lock:
            if not busy and len(parent._spare_children) < _SPARE_CHILDREN and not parent._closed:
                parent._spare_children.append((self._spare_signature, self))
                return busy
        self._release_child()
        return busy

    def _release_child(self) -> None:
        for key in list(self.instances):
            self.pm.unregister(name=key)
        self.instances.clear()
        self._kinds.clear()
        self.hooks.close()

    def deactivate(self, instance: object) -> None:
        key = self.pm.get_name(instance)
        if key is not None:
            self.pm.unregister(instance)
            self.instances.pop(key, None)
            self._kinds.pop(key, None)
            self._names.pop(key, None)

    # ------------------------------------------------------------------------------------ calls

    def notify_memory_write(self, write: MemoryWrite, source: str | None = None) -> None:
        """Mirror a write to every active memory provider except the one that made it."""
        self.hooks.on_memory_write(write=write, exclude=f"{MEMORY}:{source or write.provider}")

    def tools(self) -> dict[str, tuple[Tool, str]]:
        """Every tool by name -> (tool, plugin): registered ones and those of active instances.

        Raises :class:`RegistryError` naming both plugins when two offer one name.
        """
        out: dict[str, tuple[Tool, str]] = {}
        for name, reg in self.registries.tools.entries.items():
            out[name] = (reg.obj, reg.plugin)
        for outcome in self.hooks.get_tools():
            for tool in outcome.value or ():
                if tool.name in out:
                    raise RegistryError(
                        f"tool {tool.name!r} is offered by both {out[tool.name][1]!r} and "
                        f"{outcome.plugin!r}; disable one of them"
                    )
                out[tool.name] = (tool, outcome.plugin)
        return out

    def shutdown(self, drain_timeout: float | None = None) -> list[str]:
        """Wait (within ``memory.worker_drain_timeout``) for late calls still running in plugins,
        then call ``shutdown`` on active instances in reverse activation order, each isolated and
        bounded. Returns the lanes that were still busy (also logged)."""
        bound = self.config.core.memory.worker_drain_timeout if drain_timeout is None else drain_timeout
        busy = self.hooks.drain(bound)
        self._lanes_closed = True
        if busy:
            log.error("plugin calls still running after the %.1f s shutdown bound; their work may "
                      "be lost: %s", bound, "; ".join(busy))
        for key in reversed(list(self.instances)):
            self.hooks.shutdown(only=key)
        for instance in list(self.instances.values()):
            self.deactivate(instance)
        with self._spare_lock:
            self._closed = True
            spares, self._spare_children = self._spare_children, []
        for _sig, spare in spares:
            spare._release_child()
        with self._llm_lock:
            clients, self._llms = list(self._llms.values()), {}
        for closer in [getattr(c, "close", None) for c in clients] + [
                getattr(self._embedder, "close", None)]:
            if callable(closer):
                try:
                    closer()
                except Exception:
                    log.debug("closing a model client or the embedder raised", exc_info=True)
        self.hooks.close()
        if self._erasures is not None:
            self._erasures.close()
        return busy
