"""Finding and importing plugins.

Three sources, tried in this order — which is also the precedence rule for plugin names:

1. **builtin**: the first-party plugins shipped inside hermes-core (:data:`BUILTIN_PLUGINS`);
2. **entry-point**: distributions declaring the ``hermes_core.plugins`` entry-point group (the
   plugin's name is the entry point's name), sorted by distribution then name;
3. **directory**: packages in ``$HERMES_CORE_HOME/plugins/<name>/`` (the name is the folder's).

A name already taken by an earlier source is never silently shadowed: the later plugin is not
imported and is listed with an error naming both. Blocked names (``plugins.disabled`` and
``HERMES_CORE_DISABLE_PLUGINS``) are never imported; when the allow-list ``plugins.enabled_only``
is set, no plugin it does not name is imported either. A plugin that fails to import is recorded and
reported; with ``HERMES_CORE_STRICT_PLUGINS=1`` it raises instead.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    from importlib import metadata

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "ESSENTIAL_PLUGINS",
    "Candidate",
    "PluginRecord",
    "allowed_names",
    "blocked_names",
    "discover",
    "entry_points",
    "import_candidate",
    "inline",
    "install_problems",
    "installed_distributions",
    "runs_inline",
    "strict_mode",
]

ENTRY_POINT_GROUP = "hermes_core.plugins"
DISABLE_ENV = "HERMES_CORE_DISABLE_PLUGINS"
STRICT_ENV = "HERMES_CORE_STRICT_PLUGINS"
#: parent package name for directory plugins (so their relative imports work)
DIRECTORY_PACKAGE = "hermes_core_directory_plugins"

#: name -> module of every first-party plugin, in load order
BUILTIN_PLUGINS: dict[str, str] = {
    "file_memory": "hermes_core.plugins.memory.file_memory",
    "session_archive": "hermes_core.plugins.memory.session_archive",
    "compressor": "hermes_core.plugins.context_engine.compressor",
    "lossless": "hermes_core.plugins.context_engine.lossless",
    "skills": "hermes_core.plugins.memory.skills",
    "todo": "hermes_core.plugins.tools.todo",
    "delegate": "hermes_core.plugins.tools.delegate",
    "memory_review": "hermes_core.plugins.memory_review",
    "cli": "hermes_core.plugins.platforms.cli",
    "webhook": "hermes_core.plugins.platforms.webhook",
    "mcp": "hermes_core.plugins.mcp",
    "inspect": "hermes_core.plugins.inspect",
    "eval": "hermes_core.plugins.eval",
    "replay": "hermes_core.plugins.replay",
    "scaffold": "hermes_core.plugins.scaffold",
    "minilm": "hermes_core.plugins.embedders.minilm",
    "anthropic": "hermes_core.plugins.llm.anthropic",
    "openai": "hermes_core.plugins.llm.openai",
}

#: first-party plugins that carry what the agent loop always did (the memory review): found even
#: when a host is loaded without the built-ins; ``plugins.disabled`` and ``plugins.enabled_only``
#: apply to them as to any plugin
ESSENTIAL_PLUGINS = frozenset({"memory_review"})

#: the attribute :func:`inline` sets on an implementation
_INLINE = "_hermes_core_inline"

_F = TypeVar("_F", bound=Callable[..., object])


def inline(fn: _F) -> _F:
    """Mark a built-in plugin module's hook implementation as one the kernel runs on the
    calling thread (no lane, no deadline): a few microseconds of in-memory bookkeeping that does
    no I/O and waits for nothing, where a lane hand-off would cost every turn more than the work
    (the memory review counts a turn, picks the skill nudge, queues a due review on its own lane
    without waiting), or a wait bounded by itself inside the hook's deadline. Honoured only on
    the built-in plugins' own modules (:data:`BUILTIN_PLUGINS`, :func:`runs_inline`): anywhere
    else it is ignored and the implementation runs on its plugin's lane under its deadline."""
    setattr(fn, _INLINE, True)
    return fn


def runs_inline(plugin_name: str, plugin: object, hook: str) -> bool:
    """Whether the kernel runs ``plugin``'s implementation of ``hook`` on the calling thread:
    ``plugin`` is the built-in ``plugin_name``'s own module (not another object registered under
    its name) and marked that implementation with :func:`inline`."""
    module = BUILTIN_PLUGINS.get(plugin_name)
    return (module is not None and plugin is sys.modules.get(module)
            and getattr(getattr(plugin, hook, None), _INLINE, False) is True)


Source = Literal["builtin", "entry-point", "directory"]


@dataclass
class Candidate:
    """A plugin found by discovery, not yet imported."""

    name: str
    source: Source
    module: str | None = None  #: import path (builtin, entry point's module part)
    attr: str | None = None  #: the entry point's attribute part, if any
    path: Path | None = None  #: the package folder (directory plugins)
    distribution: str | None = None
    version: str | None = None


@dataclass
class PluginRecord:
    """What ``plugins list`` shows for one plugin."""

    name: str
    source: Source
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    path: str | None = None
    enabled: bool = True
    #: kinds it registered: memory-provider, context-engine, tool, platform
    kinds: list[str] = field(default_factory=list)
    #: "kind:name" pairs it registered
    registers: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    error: str | None = None
    #: things that work but are probably a mistake (e.g. a hook-named method without @hookimpl)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "source": self.source,
            "distribution": self.distribution,
            "version": self.version,
            "kinds": sorted(self.kinds),
            "registers": sorted(self.registers),
            "hooks": sorted(self.hooks),
            "enabled": self.enabled,
            "error": self.error,
            "warnings": list(self.warnings),
            "module": self.module,
            "path": self.path,
        }

    def fail(self, message: str) -> None:
        self.error = message if self.error is None else f"{self.error}; {message}"


def strict_mode() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _normalise(name: str) -> str:
    """PEP 503 normalisation, so 'Hermes_Core-Foo' and 'hermes-core-foo' block alike."""
    return re.sub(r"[-_.]+", "-", name).lower()


def blocked_names(configured: list[str] | tuple[str, ...] = ()) -> set[str]:
    """Normalised names blocked by the config list and ``HERMES_CORE_DISABLE_PLUGINS``."""
    env = [part.strip() for part in os.environ.get(DISABLE_ENV, "").split(",")]
    return {_normalise(n) for n in [*configured, *env] if n}


def allowed_names(enabled_only: list[str] | tuple[str, ...] | None) -> set[str] | None:
    """Normalised names of the ``plugins.enabled_only`` allow-list; ``None`` when it is unset."""
    if enabled_only is None:
        return None
    return {_normalise(n) for n in enabled_only if n}


def _named(candidate: Candidate, names: set[str]) -> bool:
    if _normalise(candidate.name) in names:
        return True
    return candidate.distribution is not None and _normalise(candidate.distribution) in names


def is_blocked(candidate: Candidate, blocked: set[str], allowed: set[str] | None = None) -> bool:
    """Whether ``candidate`` must not be imported: it is in ``blocked`` (``plugins.disabled``,
    ``HERMES_CORE_DISABLE_PLUGINS``), or an allow-list (``plugins.enabled_only``, see
    :func:`allowed_names`) is set and does not name it."""
    if _named(candidate, blocked):
        return True
    return allowed is not None and not _named(candidate, allowed)


@functools.cache
def entry_points() -> tuple[metadata.EntryPoint, ...]:
    """The ``hermes_core.plugins`` entry points, read once per process."""
    from importlib import metadata  # 10+ ms: only paid by commands that look for plugins

    return tuple(metadata.entry_points(group=ENTRY_POINT_GROUP))


def installed_distributions() -> dict[str, tuple[str, frozenset[str]]]:
    """Every installed distribution: name -> (version, its entry-point groups). Read afresh (not
    cached): ``plugins install`` compares it before and after pip runs."""
    from importlib import metadata

    out: dict[str, tuple[str, frozenset[str]]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out[name] = (dist.version, frozenset(ep.group for ep in dist.entry_points))
    return out


def install_problems(before: dict[str, tuple[str, frozenset[str]]],
                     after: dict[str, tuple[str, frozenset[str]]]) -> list[str]:
    """What makes an install offer no plugin: none of the distributions it added or changed
    declares an entry point in :data:`ENTRY_POINT_GROUP` (one in a look-alike group is named)."""
    changed = {name: value for name, value in after.items() if before.get(name) != value}
    if not changed or any(ENTRY_POINT_GROUP in groups for _v, groups in changed.values()):
        return []
    problems = []
    for name, (version, groups) in sorted(changed.items()):
        for group in sorted(groups):
            if _looks_like_ours(group):
                problems.append(
                    f"{name} {version} declares entry points in the group {group!r}, not "
                    f"{ENTRY_POINT_GROUP!r}: hermes-core does not load them. Rename the group in "
                    f"its pyproject.toml: [project.entry-points.\"{ENTRY_POINT_GROUP}\"]")
    if not problems:
        problems.append(
            f"none of the {len(changed)} distribution(s) pip installed or changed "
            f"({', '.join(sorted(changed))}) declares an entry point in the group "
            f"{ENTRY_POINT_GROUP!r}, so hermes-core loads no plugin from them. A plugin's "
            f"pyproject.toml needs [project.entry-points.\"{ENTRY_POINT_GROUP}\"] "
            "name = \"module\"")
    return problems


def _looks_like_ours(group: str) -> bool:
    squashed = re.sub(r"[^a-z]", "", group.lower())
    return "hermes" in squashed or difflib.SequenceMatcher(
        None, squashed, re.sub(r"[^a-z]", "", ENTRY_POINT_GROUP)).ratio() > 0.8


def _entry_point_candidates() -> list[Candidate]:
    out = []
    for ep in entry_points():
        dist = getattr(ep, "dist", None)
        out.append(
            Candidate(
                name=ep.name,
                source="entry-point",
                module=ep.module,
                attr=ep.attr or None,
                distribution=dist.metadata["Name"] if dist is not None else None,
                version=dist.version if dist is not None else None,
            )
        )
    out.sort(key=lambda c: ((c.distribution or "").lower(), c.name))
    return out


def _directory_candidates(plugins_dir: Path) -> list[Candidate]:
    try:
        children = sorted(p for p in plugins_dir.iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [
        Candidate(name=child.name, source="directory", path=child)
        for child in children
        if not child.name.startswith((".", "_"))
    ]


def discover(plugins_dir: Path | None, *, builtins: bool = True, entry_point: bool = True) -> list[Candidate]:
    """Every plugin candidate, in precedence order, without importing any."""
    found: list[Candidate] = []
    found += [Candidate(name=n, source="builtin", module=m) for n, m in BUILTIN_PLUGINS.items()
              if builtins or n in ESSENTIAL_PLUGINS]
    if entry_point:
        found += _entry_point_candidates()
    if plugins_dir is not None:
        found += _directory_candidates(plugins_dir)
    return found


class ImportFailure(Exception):
    """A candidate could not be imported; ``str()`` is the message for the record."""


def import_candidate(candidate: Candidate) -> object:
    """Import a candidate and return the object holding its hookimpls.

    Raises :class:`ImportFailure` with a message that says what is wrong and how to fix it.
    """
    if candidate.source == "directory":
        return _import_directory(candidate)
    assert candidate.module is not None
    where = (
        f"entry point {candidate.name!r} of distribution {candidate.distribution!r}"
        if candidate.source == "entry-point"
        else f"built-in plugin {candidate.name!r}"
    )
    try:
        obj: object = importlib.import_module(candidate.module)
        for part in (candidate.attr or "").split("."):
            if part:
                obj = getattr(obj, part)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        if candidate.module == missing or candidate.module.startswith(missing + "."):
            raise ImportFailure(
                f"{where} names module {candidate.module!r}, which does not exist; reinstall "
                f"{candidate.distribution or 'hermes-core'} or uninstall it"
            ) from exc
        raise ImportFailure(
            f"{where} failed to import: it needs module {missing!r}, which is not installed; "
            f"install it or reinstall {candidate.distribution or 'the plugin'}"
        ) from exc
    except AttributeError as exc:
        raise ImportFailure(
            f"{where} names {candidate.module}:{candidate.attr}, which does not exist ({exc})"
        ) from exc
    except (Exception, SystemExit) as exc:  # a plugin must never take the host down
        raise ImportFailure(
            f"{where} raised {type(exc).__name__} while importing: {exc}"
        ) from exc
    return obj


def _import_directory(candidate: Candidate) -> ModuleType:
    assert candidate.path is not None
    init = candidate.path / "__init__.py"
    if not init.is_file():
        raise ImportFailure(
            f"directory plugin {candidate.name!r} at {candidate.path} has no __init__.py; a "
            "directory plugin is a package: add __init__.py holding its @hookimpl functions"
        )
    if DIRECTORY_PACKAGE not in sys.modules:
        parent = ModuleType(DIRECTORY_PACKAGE)
        parent.__path__ = []
        sys.modules[DIRECTORY_PACKAGE] = parent
    mod_name = f"{DIRECTORY_PACKAGE}.{re.sub(r'[^0-9a-zA-Z_]', '_', candidate.name)}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(
        mod_name, init, submodule_search_locations=[str(candidate.path)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(mod_name, None)
        raise ImportFailure(
            f"directory plugin {candidate.name!r} ({init}) raised {type(exc).__name__} "
            f"while importing: {exc}"
        ) from exc
    return module
