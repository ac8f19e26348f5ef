"""The plugin host: one pluggy PluginManager, the plugins loaded into it, and isolated hook calls.

There is no module-global manager: :meth:`PluginHost.load` builds a fresh one (tests build as many
as they like). Loading never raises for a plugin's fault unless strict mode is on; every failure is
kept in :attr:`PluginHost.records` and shown by ``hermes-core plugins list`` and ``doctor``.

:class:`PluginHost` is the public face; its parts live in private modules, one role each:
:mod:`._hostbase` (the state, and the services plugin contexts ask for), :mod:`._loading`
(plugins into the manager, their registrations filed) and :mod:`._activation` (instances built,
checked and registered). What stays here: loading from a home, config checks, child hosts for
delegation, the tool table and shutdown.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ._activation import Activation
from ._command_table import COMMAND_GROUPS, RESERVED_COMMANDS, RESERVED_SUBCOMMANDS
from ._loading import Loading
from .errors import ConfigError, RegistryError
from .hooks import ENGINE, PLATFORM, HookOutcome
from .hookspecs import create_plugin_manager
from .loader import PluginRecord, allowed_names, blocked_names, discover
from .paths import home_dir, plugins_dir

if TYPE_CHECKING:
    import pluggy

    from .config import LoadedConfig
    from .kinds import Tool

__all__ = ["COMMAND_GROUPS", "RESERVED_COMMANDS", "RESERVED_SUBCOMMANDS", "HookOutcome", "PluginHost",
           "create_plugin_manager"]

log = logging.getLogger("hermes_core")

#: closed child hosts a host keeps for reuse (see :meth:`PluginHost.child_host`)
_SPARE_CHILDREN = 4


class PluginHost(Loading, Activation):
    """Plugins loaded into a PluginManager, their registries, and the instances in use."""

    def __init__(self, pm: pluggy.PluginManager, home: Path, config: LoadedConfig) -> None:
        super().__init__(pm, home, config)
        #: the host this one was made from by :meth:`child_host` (None for a loaded host)
        self.parent: PluginHost | None = None
        #: closed child hosts kept for the next delegation (building one registers every plugin
        #: again), with the registrations they were built from
        self._spare_children: list[tuple[tuple[tuple[str, int], ...], PluginHost]] = []
        self._spare_lock = threading.Lock()
        self._spare_signature: tuple[tuple[str, int], ...] = ()
        self._closed = False

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
        if config is None:  # the config models are imported with the first config, not the kernel
            from .config import load_config

            config = load_config(home)
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
        # a session skips a provider whose plugin is disabled; selecting one anew is a mistake
        skipped = {name for _i, name in self.registries.skipped_providers(before)}
        new += [f"{after.where('memory.providers')}: memory.providers[{i}] selects {name!r}, "
                f"whose plugin is disabled: enable it first (hermes-core plugins enable {name})"
                for i, name in self.registries.skipped_providers(after) if name not in skipped]
        if new:
            raise ConfigError("\n".join(new) + "\nconfig.yaml was not changed.")

    # ------------------------------------------------------------------------------- delegation

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

    # ------------------------------------------------------------------------------------ calls

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
