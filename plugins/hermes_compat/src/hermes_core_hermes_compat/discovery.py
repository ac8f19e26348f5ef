"""Finding Hermes Agent plugins without importing them.

Sources, in precedence order (a name taken by an earlier source is reported as a clash, never
silently shadowed):

1. entry points of installed distributions in the groups of :data:`GROUPS` (Hermes' own two, and
   two non-standard ones published plugins use);
2. folders ``$HERMES_CORE_HOME/hermes-plugins/<name>/`` (a Hermes folder plugin copied there: a
   package whose ``__init__.py`` defines ``register(ctx)``);
3. folders ``<Hermes home>/plugins/<name>/`` (and ``plugins/memory/<name>/``,
   ``plugins/context_engine/<name>/``) of an existing Hermes home, when
   ``HERMES_CORE_HERMES_HOME`` names one.

Whether a plugin is a memory provider or a context engine is decided from its source text (which
registration it calls), read from the file, so nothing is imported until the plugin is selected.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from importlib import metadata

__all__ = [
    "FOLDER_NAME",
    "GROUPS",
    "HERMES_HOME_ENV",
    "HermesCandidate",
    "discover",
    "kind_name",
]

#: this distribution's package: its Hermes-side provider serves hermes-core to Hermes and is never
#: offered to hermes-core as a Hermes plugin (it would load the stack inside itself)
_OWN_PACKAGE = __name__.rpartition(".")[0]
#: entry-point groups Hermes plugins are published under, the provider groups first: a
#: distribution publishing one name in a provider group and in the general plugins group (its
#: provider there, its CLI commands here) is listed once, as its provider
GROUPS = ("hermes_agent.memory_providers", "hermes.memory_provider", "hermes.memory_providers",
          "hermes_agent.plugins")
#: the drop-in folder for Hermes folder plugins, inside the hermes-core home
FOLDER_NAME = "hermes-plugins"
#: an existing Hermes home whose plugins/ folder is scanned too
HERMES_HOME_ENV = "HERMES_CORE_HERMES_HOME"

Kind = Literal["memory-provider", "context-engine"]
Source = Literal["entry-point", "folder", "hermes-home"]


@dataclass
class HermesCandidate:
    """A Hermes plugin found, not imported."""

    #: the hermes-core name: ``hermes-<name>``
    name: str
    #: the plugin's own name (entry point or folder)
    plugin: str
    source: Source
    kind: Kind
    group: str | None = None
    module: str | None = None
    attr: str | None = None
    path: Path | None = None
    distribution: str | None = None
    version: str | None = None
    #: set when the name clashes with an earlier candidate (then it is never loaded)
    clash: str | None = None
    #: a general plugin (its source registers no provider or engine): it yields its name to a
    #: provider or engine found anywhere else
    general: bool = False

    @property
    def where(self) -> str:
        if self.source == "entry-point":
            return (f"entry point {self.plugin!r} ({self.group}) of {self.distribution or '?'} "
                    f"{self.version or ''}".rstrip())
        return f"{self.source} plugin at {self.path}"


def kind_name(plugin: str) -> str:
    """``hermes-<plugin>``, lower-cased, with anything but letters and digits turned into ``-``
    (so ``local_memory`` and ``local-memory`` name one plugin, and a name a plugin already
    prefixes with ``hermes-`` is not prefixed twice)."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", plugin.lower()).strip("-") or "plugin"
    if cleaned.startswith("hermes-"):
        cleaned = cleaned[len("hermes-"):] or "plugin"
    return f"hermes-{cleaned}"[:64]


_ENGINE_CALL = re.compile(r"register_context_engine\s*\(|\(\s*ContextEngine\s*\)|ContextCompressor\)")
_MEMORY_CALL = re.compile(r"register_memory_provider\s*\(|\(\s*MemoryProvider\s*\)")


def _kind_of_text(text: str) -> Kind:
    engine, memory = bool(_ENGINE_CALL.search(text)), bool(_MEMORY_CALL.search(text))
    return "context-engine" if engine and not memory else "memory-provider"


def _module_file(dist: metadata.Distribution, module: str) -> Path | None:
    """The source file of ``module`` inside an installed distribution, found without importing
    it: a top-level module through its import spec, a dotted one from the distribution's file
    list (finding the spec of a submodule would import its parent packages)."""
    if "." not in module:
        import importlib.util

        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
        return Path(spec.origin) if spec is not None and spec.origin else None
    parts = module.split(".")
    wanted = {"/".join(parts) + "/__init__.py", "/".join(parts) + ".py"}
    files = getattr(dist, "files", None) or ()
    for file in files:
        if str(file).replace("\\", "/") in wanted:
            located = dist.locate_file(file)
            return Path(str(located))
    return None


@functools.cache
def _entry_points() -> tuple[tuple[str, metadata.EntryPoint], ...]:
    from importlib import metadata

    found: list[tuple[str, metadata.EntryPoint]] = []
    selected = metadata.entry_points()
    for group in GROUPS:
        found.extend((group, ep) for ep in selected.select(group=group))
    return tuple(found)


def _from_entry_points() -> list[HermesCandidate]:
    return [dataclasses.replace(c) for c in _entry_point_candidates()]


@functools.cache
def _entry_point_candidates() -> tuple[HermesCandidate, ...]:
    """Read once per process, like the kernel's own entry points."""
    out: list[HermesCandidate] = []
    for group, ep in _entry_points():
        if ep.module.startswith(_OWN_PACKAGE):
            continue  # hermes-core's own stack offered to Hermes (hermes_side): never bridged back
        dist = ep.dist
        module = ep.module
        kind: Kind = "memory-provider"
        general = False
        if group == "hermes_agent.plugins":
            file = _module_file(dist, module) if dist is not None else None
            try:
                text = file.read_text(encoding="utf-8", errors="replace") if file else ""
            except OSError:
                text = ""
            kind = _kind_of_text(text)
            general = bool(text) and not (_ENGINE_CALL.search(text) or _MEMORY_CALL.search(text))
        out.append(HermesCandidate(
            name=kind_name(ep.name), plugin=ep.name, source="entry-point", kind=kind,
            group=group, module=module, attr=ep.attr or None,
            distribution=dist.metadata["Name"] if dist is not None else None,
            version=dist.version if dist is not None else None, general=general))
    out.sort(key=lambda c: (GROUPS.index(c.group or GROUPS[0]), (c.distribution or "").lower(),
                            c.plugin))
    return tuple(out)


def _folder(path: Path, source: Source, kind: Kind | None = None) -> HermesCandidate | None:
    init = path / "__init__.py"
    if path.name.startswith((".", "_")) or not init.is_file():
        return None
    try:
        text = init.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    if f"{_OWN_PACKAGE}.hermes_side" in text:
        return None  # the folder plugin `hermes_side install` writes: hermes-core itself
    return HermesCandidate(name=kind_name(path.name), plugin=path.name, source=source,
                           kind=kind or _kind_of_text(text), path=path)


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError:
        return []


def _from_folders(home: Path) -> list[HermesCandidate]:
    out = [c for p in _children(home / FOLDER_NAME) if (c := _folder(p, "folder"))]
    hermes_home = os.environ.get(HERMES_HOME_ENV, "").strip()
    if hermes_home:
        base = Path(hermes_home).expanduser() / "plugins"
        for sub, kind in (("memory", "memory-provider"), ("context_engine", "context-engine")):
            out += [c for p in _children(base / sub) if (c := _folder(p, "hermes-home", kind))]  # type: ignore[arg-type]
        out += [c for p in _children(base) if p.name not in ("memory", "context_engine")
                and (c := _folder(p, "hermes-home"))]
    return out


def discover(home: Path) -> list[HermesCandidate]:
    """Every Hermes plugin found, in precedence order; later ones with a taken name carry
    ``clash``."""
    seen: dict[str, HermesCandidate] = {}
    out: list[HermesCandidate] = []
    found = [*_from_entry_points(), *_from_folders(home)]
    for candidate in sorted(found, key=lambda c: c.general):  # stable: the order above
        first = seen.get(candidate.name)
        if (first is not None and first.source == candidate.source == "entry-point"
                and first.distribution == candidate.distribution):
            continue  # one plugin's two entry points (see GROUPS): not a clash
        if first is not None:
            candidate.clash = (
                f"the name {candidate.name!r} is already taken by the Hermes {first.where}; "
                f"this {candidate.where} is not loaded. Remove or rename one of them")
        else:
            seen[candidate.name] = candidate
        out.append(candidate)
    return out
