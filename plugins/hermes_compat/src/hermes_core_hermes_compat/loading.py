"""Importing a Hermes plugin and collecting what its ``register(ctx)`` registers.

An entry point or folder may hold a module with ``register(ctx)`` (the usual case), a
``register`` function itself, or a provider/engine class; an entry point may also name a
provider instance, an object with ``register``, or a provider factory (as newer Hermes reads
them). :func:`load` imports it (with the stand-ins of :mod:`.shims` serving the Hermes modules
it imports when hermes-agent is absent), calls its registration with a collecting context, and
returns the provider or engine objects.
Where the bridge loads a plugin (``hermes-core hermes plugins``, ``doctor``, ``config
validate``, a host building a provider or engine) the import and registration are bounded by
:func:`bounded`: a plugin that hangs in them is reported, and the command goes on without it.
Registrations hermes-core does not support (tools, hooks, commands, skills, ...) are recorded by
name and skipped; the rest is kept.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import logging
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from . import calls, host_access, shims
from .discovery import HermesCandidate
from .general import Registered, RegisteredCommand, RegisteredSkill, RegisteredTool
from .host_access import HostAccess

__all__ = ["NEEDS_HERMES", "HermesLoadError", "Loaded", "bounded", "deadline", "load", "unload"]

#: top-level modules of hermes-agent that the stand-ins do not provide
HERMES_TOP_LEVEL = frozenset({"agent", "tools", "hermes_cli", "hermes_constants", "run_agent",
                              "hermes_state", "gateway", "cron", "model_tools", "toolsets",
                              "hermes_logging", "hermes_time", "utils", "providers"})
NEEDS_HERMES = "needs hermes-agent"
_PACKAGE = "hermes_core_hermes_folder_plugins"
#: guards :data:`_locks` and the folder plugins' parent package; each plugin is imported under a
#: lock of its own, so one whose import hangs (its thread holding its lock) never blocks another's
_lock = threading.RLock()
_locks: dict[str, threading.RLock] = {}
#: the plugins (by ``where``) with a call still running past its deadline, and that call: a
#: later one is refused at once instead of waiting a deadline again behind it
_hung: dict[str, str] = {}
log = logging.getLogger(__name__)
T = TypeVar("T")


class HermesLoadError(Exception):
    """A Hermes plugin cannot be loaded: ``status`` is ``failed`` or ``needs hermes-agent``,
    the message says what is wrong and the fix."""

    def __init__(self, message: str, *, status: str = "failed", fix: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.fix = fix


@dataclass
class Loaded:
    """What one registration produced."""

    providers: list[Any] = field(default_factory=list)
    engines: list[Any] = field(default_factory=list)
    #: hooks, tools and commands (:mod:`.general`)
    registered: Registered = field(default_factory=Registered)
    #: registrations skipped: ``register_middleware``, ...
    unsupported: list[str] = field(default_factory=list)
    #: registrations refused for bad input (``ctx.register_skill('x', ...): why``); the rest runs
    refused: list[str] = field(default_factory=list)
    #: ``ctx.on_unload(callback)`` callbacks, run (last first) when the plugin's instance shuts down
    on_unload: list[Any] = field(default_factory=list)
    #: what ``ctx.llm`` and ``ctx.dispatch_tool`` reach (the instance's kernel context)
    host: HostAccess = field(default_factory=HostAccess)


class _Manifest:
    """What a plugin may read of ``ctx.manifest``."""

    def __init__(self, name: str) -> None:
        self.name = self.key = name
        self.source = "hermes-core"


class _Unload:
    """What ``ctx.on_unload`` returns: ``dispose()`` withdraws the callback."""

    def __init__(self, callbacks: list[Any], callback: Any) -> None:
        self._callbacks, self._callback = callbacks, callback

    def dispose(self) -> None:
        if self._callback in self._callbacks:
            self._callbacks.remove(self._callback)


class _Collector:
    """The ``ctx`` handed to ``register(ctx)``: keeps providers, engines, hooks, tools and the
    names of commands; notes the rest. Of what newer Hermes versions added to it, the probes and
    settings answer as a Hermes with no settings and no grants does (``plugin_id``,
    ``has_plugin``, ``has_capability``, ``get_config``; ``set_config`` refuses, as in a managed
    Hermes install), and ``on_unload`` callbacks run when the plugin's instance shuts down.
    ``llm`` and ``dispatch_tool`` (Hermes 0.19.0's) run on hermes-core's model client and tool
    runner (:mod:`.host_access`)."""

    #: Hermes' profile name for a home that is not one of its profiles
    profile_name = "default"

    def __init__(self, loaded: Loaded, plugin: str) -> None:
        self._loaded = loaded
        self.manifest = _Manifest(plugin)

    @functools.cached_property
    def llm(self) -> host_access.PluginLlm:
        """Hermes' ``ctx.llm``: completions on hermes-core's main model client."""
        return host_access.PluginLlm(self.manifest.key, self._loaded.host)

    def dispatch_tool(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Hermes' ``ctx.dispatch_tool``: through the running conversation's tool runner."""
        return host_access.dispatch_tool(tool_name, args, **kwargs)

    @functools.cached_property
    def state(self) -> host_access.PluginState:
        """Newer Hermes' ``ctx.state``: the plugin's durable JSON values."""
        return host_access.PluginState(self.manifest.key)

    def call_mcp(self, server: str, tool: str, arguments: dict[str, Any] | None = None,
                 timeout: float = 30) -> dict[str, Any]:
        """Newer Hermes' ``ctx.call_mcp``: a server is callable only when the plugin's MCP
        allow-list names it; hermes-core has no such list, so every call is refused as newer
        Hermes refuses one (its MCP servers are hermes-core's tools, which
        ``ctx.dispatch_tool`` reaches in a tool call)."""
        raise PermissionError(f"Plugin {self.manifest.name!r} is not allowed to call MCP server "
                              f"{server!r}: hermes-core grants no Hermes plugin MCP access (its "
                              "MCP tools are reached with ctx.dispatch_tool inside a tool call)")

    @property
    def plugin_id(self) -> str:
        return self.manifest.key

    def has_plugin(self, plugin_id: str) -> bool:
        """The bridge loads each Hermes plugin by itself: no other is known to this one."""
        return False

    def has_capability(self, capability: str) -> bool:
        """No Hermes capability grant exists in hermes-core (newer Hermes fails closed too)."""
        return False

    def get_config(self, key: str, default: Any = None) -> Any:
        """Hermes' ``plugins.entries.<id>.settings``: none in hermes-core, so ``default``."""
        return default

    def set_config(self, key: str, value: Any) -> None:
        raise PermissionError(f"Plugin setting {key!r} cannot be changed: hermes-core keeps a "
                              "Hermes plugin's settings in its own config.yaml section")

    def on_unload(self, callback: Any) -> _Unload:
        if not callable(callback):
            raise TypeError("on_unload callback must be callable")
        self._loaded.on_unload.append(callback)
        return _Unload(self._loaded.on_unload, callback)

    def register_memory_provider(self, provider: Any, *args: Any, **kwargs: Any) -> None:
        self._loaded.providers.append(provider)

    def register_context_engine(self, engine: Any, *args: Any, **kwargs: Any) -> None:
        self._loaded.engines.append(engine)

    def register_hook(self, hook_name: str, callback: Any) -> None:
        if not callable(callback):
            raise TypeError(f"register_hook({hook_name!r}, ...) needs a callable, got "
                            f"{type(callback).__name__}")
        self._loaded.registered.hooks.setdefault(str(hook_name), []).append(callback)

    def register_tool(self, name: str, toolset: str, schema: Any, handler: Any,
                      check_fn: Any = None, requires_env: Any = None, is_async: bool = False,
                      description: str = "", emoji: str = "", override: bool = False) -> None:
        if not callable(handler):
            raise TypeError(f"register_tool({name!r}, ...) needs a callable handler")
        self._loaded.registered.tools.append(RegisteredTool(
            name=str(name), toolset=str(toolset), schema=schema, handler=handler,
            check_fn=check_fn if callable(check_fn) else None, is_async=bool(is_async),
            description=str(description or "")))

    def register_command(self, name: str, handler: Any = None, description: str = "",
                         args_hint: str = "") -> None:
        clean = str(name).lower().strip().lstrip("/").replace(" ", "-")
        if not clean or not callable(handler):  # Hermes warns and skips it too
            self._loaded.unsupported.append("register_command (no name or handler)")
            return
        self._loaded.registered.commands.append(RegisteredCommand(
            "slash", clean, str(description or args_hint or ""), handler=handler))

    def register_cli_command(self, name: str, help: str = "", setup_fn: Any = None,
                             handler_fn: Any = None, description: str = "") -> None:
        if not str(name).strip() or not (callable(setup_fn) or callable(handler_fn)):
            self._loaded.unsupported.append("register_cli_command (no name or callable)")
            return
        self._loaded.registered.commands.append(RegisteredCommand(
            "cli", str(name).strip(), str(help or description or ""),
            handler=handler_fn if callable(handler_fn) else None,
            setup_fn=setup_fn if callable(setup_fn) else None))

    def register_skill(self, name: str, path: Any, description: str = "") -> None:
        """Kept as Hermes does (a read-only skill loaded only on request). A bad name or a
        missing file, which Hermes raises for, is refused and named; the rest of the plugin
        still runs."""
        clean = str(name)
        where = Path(str(path))
        if not clean or not re.fullmatch(r"[A-Za-z0-9_-]+", clean):
            why = "the name must match [a-zA-Z0-9_-]+"
        elif not where.is_file():
            why = f"SKILL.md not found at {where}"
        else:
            self._loaded.registered.skills.append(RegisteredSkill(clean, where,
                                                                  str(description or "")))
            return
        self._loaded.refused.append(f"ctx.register_skill({clean!r}, ...): {why}")

    def inject_message(self, content: str, role: str = "user") -> bool:
        """Hermes answers False where it has no interactive CLI to queue into (its gateway), with
        a warning; hermes-core gives a plugin no way into a conversation either. The warning
        names the plugin, so a command that relies on it (``/dreaming run`` starts its cycle
        this way) is seen not to have started anything."""
        log.warning("Hermes plugin %r: ctx.inject_message() asked to put a %s message of %d "
                    "characters into the conversation; hermes-core lets no plugin add to a "
                    "conversation (as in Hermes' gateway), so it was not delivered",
                    self.manifest.name, role, len(str(content)))
        return False

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("register_"):
            raise AttributeError(name)

        def unsupported(*args: Any, **kwargs: Any) -> None:
            if name not in self._loaded.unsupported:
                self._loaded.unsupported.append(name)
        return unsupported


def _import_folder(candidate: HermesCandidate) -> ModuleType:
    assert candidate.path is not None
    with _lock:
        if _PACKAGE not in sys.modules:
            parent = ModuleType(_PACKAGE)
            parent.__path__ = []
            sys.modules[_PACKAGE] = parent
    # the folder's path is part of the name: two homes (or two tests) never share a module
    digest = hashlib.sha256(str(candidate.path.resolve()).encode("utf-8")).hexdigest()[:12]
    name = f"{_PACKAGE}.{re.sub(r'[^0-9a-zA-Z_]', '_', candidate.plugin)}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, candidate.path / "__init__.py", submodule_search_locations=[str(candidate.path)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _target(candidate: HermesCandidate) -> Any:
    if candidate.source != "entry-point":
        return _import_folder(candidate)
    assert candidate.module is not None
    obj: Any = importlib.import_module(candidate.module)
    for part in (candidate.attr or "").split("."):
        if part:
            obj = getattr(obj, part)
    return obj


def _explain_missing(candidate: HermesCandidate, exc: ModuleNotFoundError) -> HermesLoadError:
    missing = exc.name or "?"
    top = missing.split(".")[0]
    module = candidate.module or ""
    if module and (module == missing or module.startswith(missing + ".")):
        holder = sys.modules.get(top)
        where = getattr(holder, "__file__", None) or list(getattr(holder, "__path__", []) or [])
        if holder is not None:
            return HermesLoadError(
                f"{candidate.where}: its module {module!r} cannot be imported because the "
                f"top-level name {top!r} is taken by another package ({where}); a Hermes plugin "
                f"shipping a generic top-level package clashes with it",
                fix=f"install the plugin in an environment where {top!r} is only the plugin's "
                    "(or ask its author to use a unique package name)")
        return HermesLoadError(f"{candidate.where}: module {module!r} does not exist",
                               fix=f"reinstall {candidate.distribution or 'the plugin'}")
    if top in HERMES_TOP_LEVEL:
        return HermesLoadError(
            f"{candidate.where} imports {missing!r}, a part of Hermes Agent the bridge does not "
            "provide", status=NEEDS_HERMES,
            fix="pip install hermes-agent in this environment (the bridge then uses its modules)")
    return HermesLoadError(
        f"{candidate.where} failed to import: it needs module {missing!r}, which is not installed",
        fix=f"pip install the package providing {missing!r}, or reinstall "
            f"{candidate.distribution or 'the plugin'} with its dependencies")


def load(candidate: HermesCandidate, hermes_home: Path, host: HostAccess | None = None,
         *, timeout: float | None = None) -> Loaded:
    """Import ``candidate`` and run its registration; a fresh provider/engine each call (but for
    an entry point naming a provider instance: that one object each time, as in newer Hermes).

    ``hermes_home`` is what the stand-in ``get_hermes_home()`` answers meanwhile (a plugin that
    reads its settings at registration reads them there). ``host`` is what its ``ctx.llm`` and
    ``ctx.dispatch_tool`` reach (none: ``ctx.llm`` raises as a Hermes with no model does).
    ``timeout``: the import and registration run under :func:`bounded` (none: on the caller's
    thread, unbounded).

    Raises :class:`HermesLoadError` saying what failed and the fix; never lets the plugin's own
    exception (or ``SystemExit``) through.
    """
    if candidate.clash:
        raise HermesLoadError(candidate.clash, fix="remove or rename one of the two plugins")
    shims.install()
    if timeout is not None:
        step = ["import"]

        def steps() -> Loaded:  # on the bounded call's thread, in ``hermes_home``
            target = _import(candidate)
            step[0] = "register(ctx)"
            return _register(candidate, target, host or HostAccess())
        return bounded(candidate, step, timeout, hermes_home, steps)
    with calls.in_home(hermes_home):
        return _register(candidate, _import(candidate), host or HostAccess())


def deadline(config: Any) -> float:
    """The deadline of :func:`bounded` calls under ``config`` (a core config, or a home whose
    ``config.yaml`` is read; an unreadable one gives the default): the kernel's deadline of
    the inspection commands' plugin checks, ``hooks.timeouts.doctor_checks``."""
    from hermes_core.config import DEFAULT_HOOK_TIMEOUTS, load_config
    from hermes_core.errors import HermesCoreError

    if isinstance(config, Path):
        try:
            config = load_config(config).core
        except HermesCoreError:
            return DEFAULT_HOOK_TIMEOUTS["doctor_checks"]
    return float(config.hooks.timeout("doctor_checks"))


def bounded(candidate: HermesCandidate, what: str | list[str], timeout: float,
            hermes_home: Path, fn: Callable[[], T]) -> T:
    """``fn()`` (``what`` of ``candidate``: its ``is_available()``; a list's one item is read
    when the deadline passes: ``import``, then ``register(ctx)``) on a daemon
    thread of its own (:class:`.calls.Pinned`, as the bridge runs a provider's hooks), waited
    for up to ``timeout`` seconds. Past it, :class:`HermesLoadError` says the plugin hangs, in
    what, and the fix; the call goes on on its thread (a hung import cannot be stopped; a daemon
    thread never holds the process at exit), and until it returns every later bounded call of
    the plugin is refused at once."""
    with _lock:
        running = _hung.get(candidate.where)
    if running is not None:
        raise HermesLoadError(
            f"{candidate.where}: hung: its {running}, begun earlier, has still not returned "
            f"(past its deadline of {timeout:g} s)", fix=_hung_fix(candidate))
    worker = calls.Pinned(f"hermes-{candidate.plugin}-bounded", hermes_home)
    future = worker.submit(fn)
    worker.close()  # its thread ends after this call
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        late = what if isinstance(what, str) else what[0]
        with _lock:
            _hung[candidate.where] = late
        future.add_done_callback(lambda _done: _hung.pop(candidate.where, None))
        raise HermesLoadError(
            f"{candidate.where}: hung: its {late} did not return within {timeout:g} s (left "
            "running in the background; skipped)", fix=_hung_fix(candidate)) from None


def _hung_fix(candidate: HermesCandidate) -> str:
    return (f"find out why it hangs (a service it waits for; report it to the plugin's author), "
            f"or leave {candidate.name} unselected or uninstall it; if it is only slow, raise "
            "hooks.timeouts.doctor_checks")


def unload(loaded: Loaded, problem: Callable[[str], None]) -> None:
    """Run ``loaded``'s ``ctx.on_unload`` callbacks, the last registered first, once; one that
    raises is reported and the others still run (as Hermes unloads a plugin)."""
    callbacks, loaded.on_unload[:] = list(loaded.on_unload), []
    for callback in reversed(callbacks):
        try:
            callback()
        except (Exception, SystemExit) as exc:
            problem(f"its on_unload callback raised {type(exc).__name__}: {exc}")


def _import(candidate: HermesCandidate) -> Any:
    with _lock:
        shims.install()
        lock = _locks.setdefault(candidate.where, threading.RLock())
    with lock:
        try:
            target = _target(candidate)
        except ModuleNotFoundError as exc:
            raise _explain_missing(candidate, exc) from exc
        except (Exception, SystemExit) as exc:
            raise HermesLoadError(
                f"{candidate.where} raised {type(exc).__name__} while importing: {exc}",
                fix="check the plugin's own requirements (hermes-core plugins show it "
                    "installed); report the error to its author") from exc
    return target


def _folder_provider(candidate: HermesCandidate, target: Any, loaded: Loaded) -> bool:
    """Hermes' fallback for a memory provider folder whose module has no ``register(ctx)``: the
    first of its names, in ``dir()`` order, that is a ``MemoryProvider`` subclass and can be
    made without arguments. True when one was added to ``loaded``; a class that raises while
    being made is skipped, as Hermes skips it, and named if no other can be made."""
    if candidate.source == "entry-point" or candidate.kind != "memory-provider":
        return False  # Hermes 0.19.0 falls back so only in its memory provider folders
    if not isinstance(target, ModuleType):
        return False
    from agent.memory_provider import MemoryProvider  # the real one, or the bridge's stand-in

    failed: list[str] = []
    for name in dir(target):
        attr = getattr(target, name, None)
        if not (inspect.isclass(attr) and issubclass(attr, MemoryProvider)
                and attr is not MemoryProvider):
            continue
        try:
            loaded.providers.append(attr())
            return True
        except (Exception, SystemExit) as exc:
            failed.append(f"{name}() raised {type(exc).__name__}: {exc}")
    if failed:
        raise HermesLoadError(f"{candidate.where} has no register(ctx), and no MemoryProvider "
                              f"class of it could be made: {'; '.join(failed)}",
                              fix="report the error to the plugin's author")
    return False


def _zero_argument_call(target: Any) -> bool:
    try:
        inspect.signature(target).bind()
    except (TypeError, ValueError):
        return False
    return True


def _entry_point_object(candidate: HermesCandidate, target: Any, loaded: Loaded) -> bool:
    """Newer Hermes' reading of an entry point naming an object rather than a module, a class
    or a ``register(ctx)`` function: a ``MemoryProvider`` instance is the provider; an object
    with a ``register`` attribute registers through it; a callable taking no argument is a
    factory whose ``MemoryProvider`` result is the provider (otherwise it is called as
    ``register(ctx)``, as before). True when ``loaded`` got its registration here."""
    if candidate.source != "entry-point" or isinstance(target, ModuleType) \
            or inspect.isclass(target):
        return False
    from agent.memory_provider import MemoryProvider  # the real one, or the bridge's stand-in

    if isinstance(target, MemoryProvider):
        loaded.providers.append(target)
        return True
    register = getattr(target, "register", None)
    if not inspect.isroutine(target) and callable(register):
        register(_Collector(loaded, candidate.plugin))
        return True
    if callable(target) and _zero_argument_call(target):
        made = target()
        if isinstance(made, MemoryProvider):
            loaded.providers.append(made)
            return True
    return False


def _register(candidate: HermesCandidate, target: Any, host: HostAccess) -> Loaded:
    loaded = Loaded(host=host)
    register = getattr(target, "register", None) if isinstance(target, ModuleType) else target
    try:
        if _entry_point_object(candidate, target, loaded):
            pass
        elif inspect.isclass(register):
            obj = register()
            (loaded.engines if hasattr(obj, "compress") else loaded.providers).append(obj)
        elif callable(register):
            register(_Collector(loaded, candidate.plugin))
        elif _folder_provider(candidate, target, loaded):
            pass
        else:
            raise HermesLoadError(
                f"{candidate.where} has no register(ctx) function and is not a provider class",
                fix="point the entry point at the module defining register(ctx)")
    except HermesLoadError:
        raise
    except ModuleNotFoundError as exc:
        raise _explain_missing(candidate, exc) from exc
    except (Exception, SystemExit) as exc:
        raise HermesLoadError(
            f"{candidate.where}: register(ctx) raised {type(exc).__name__}: {exc}",
            fix="report the error to the plugin's author") from exc
    if not loaded.providers and not loaded.engines and not loaded.registered:
        skipped = loaded.unsupported
        extra = (f" (it registered only {', '.join(skipped)}, which hermes-core does not "
                 "run)") if skipped else ""
        raise HermesLoadError(
            f"{candidate.where} registered no memory provider, context engine, hook, tool or "
            "command"
            f"{extra}", fix="hermes-core cannot run it; uninstall it or leave it unselected")
    return loaded
