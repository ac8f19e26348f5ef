"""The state of a plugin host and the services it hands plugins; the base of
:class:`hermes_core.host.PluginHost` (its loading and activation parts are in :mod:`._loading`
and :mod:`._activation`).

What lives here: the plugin manager and the registries, the instances in use and their kinds, the
typed hook facade, and what a plugin context asks the host for: the embedder, the model clients,
the erasure generation, the problem report.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from .errors import UnknownNameError
from .hooks import ENGINE, MEMORY, MODULE, PLATFORM, Hooks
from .kinds import PluginContext
from .registry import Registries

if TYPE_CHECKING:
    from .config import LoadedConfig
    from .kinds import LLMClient
    from .loader import PluginRecord
    from .storage.erasures import ErasureLedger

__all__ = ["HostBase"]

log = logging.getLogger("hermes_core")

#: seconds a read of the erasure generation is reused (one turn's dispatcher and prefetch)
_ERASURES_FRESH = 0.005


class HostBase:
    """A plugin host's state and services (see :class:`hermes_core.host.PluginHost`)."""

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
        from .loader import runs_inline  # the built-ins' quick hooks (marked with loader.inline)

        self.hooks.engine.inline_of = runs_inline
        #: the stores' erasure generation last read by :meth:`heed_erasures` (None: not yet)
        self.erasures_seen: int | None = None
        self._erasures: ErasureLedger | None = None
        self._erasures_read_at = 0.0
        self._erasures_lock = threading.Lock()
        #: the host this one was made from by ``child_host`` (None for a loaded host): a child asks
        #: it for the embedder and the model clients
        self.parent: HostBase | None = None

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
        key = self._engine_key()
        return None if key is None else self._names.get(key)

    @property
    def engine(self) -> object | None:
        """The active context engine instance, if any."""
        key = self._engine_key()
        return None if key is None else self.instances.get(key)

    def _engine_key(self) -> str | None:
        return next((key for key, kind in self._kinds.items() if kind == ENGINE), None)

    def providers(self) -> dict[str, object]:
        """Active memory providers by their manager name, in activation order."""
        return {k: v for k, v in self.instances.items() if self._kinds.get(k) == MEMORY}

    def platforms(self) -> dict[str, object]:
        """Active platform adapters by their manager name."""
        return {k: v for k, v in self.instances.items() if self._kinds.get(k) == PLATFORM}

    def _report_problem(self, plugin: str, message: str) -> None:
        """An instance's non-fatal problem: logged, kept on its plugin's record (once)."""
        log.warning("plugin %s: %s", plugin, message)
        record = self.records.get(plugin)
        if record is not None and message not in record.warnings:
            record.warnings.append(message)
