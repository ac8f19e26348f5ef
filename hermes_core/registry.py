"""Registries: the named classes (and tools) that plugins hand the kernel.

One :class:`Registry` per kind. A name registered twice is never silently shadowed: the first
registration stays listed, the name is marked as conflicting, the later plugin gets an error naming
both, and selecting the name in the config fails until one of the plugins is disabled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .errors import ConfigError, HermesCoreError, RegistryError, UnknownNameError
from .kinds import KIND_NAME_RE, Tool, config_model

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .config import LoadedConfig

__all__ = ["KINDS", "Registration", "Registries", "Registry"]

T = TypeVar("T")

#: kind -> (registry hook, human label)
KINDS: dict[str, tuple[str, str]] = {
    "memory-provider": ("register_memory_providers", "memory provider"),
    "context-engine": ("register_context_engines", "context engine"),
    "tool": ("register_tools", "tool"),
    "platform": ("register_platforms", "platform"),
    "embedder": ("register_embedders", "embedder"),
    "llm-client": ("register_llm_clients", "model client"),
}


@dataclass(frozen=True, slots=True)
class Registration(Generic[T]):
    name: str
    obj: T
    plugin: str


@dataclass
class Registry(Generic[T]):
    """Named objects of one kind, each remembered with the plugin that registered it."""

    kind: str
    entries: dict[str, Registration[T]] = field(default_factory=dict)
    #: names registered more than once -> every plugin that registered them, in order
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    #: names registered by plugins that were disabled, for "is it disabled?" hints
    disabled_hint: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return KINDS[self.kind][1]

    def add(self, obj: T, plugin: str) -> None:
        name = self._validate(obj, plugin)
        existing = self.entries.get(name)
        if existing is not None:
            owners = self.conflicts.setdefault(name, [existing.plugin])
            owners.append(plugin)
            raise RegistryError(
                f"{self.label} {name!r} is registered by both plugin {existing.plugin!r} and "
                f"plugin {plugin!r}; disable one of them "
                f"(hermes-core plugins disable {plugin})"
            )
        self.entries[name] = Registration(name, obj, plugin)

    def _validate(self, obj: Any, plugin: str) -> str:
        if self.kind == "tool":
            if not isinstance(obj, Tool):
                raise RegistryError(
                    f"plugin {plugin!r}: register_tools must register hermes_core.Tool objects, "
                    f"got {type(obj).__name__}"
                )
            return obj.name
        hook = KINDS[self.kind][0]
        if not isinstance(obj, type):
            raise RegistryError(
                f"plugin {plugin!r}: {hook} must register classes, got an instance of "
                f"{type(obj).__name__}; pass the class itself"
            )
        name = getattr(obj, "name", None)
        if not isinstance(name, str) or not KIND_NAME_RE.match(name):
            raise RegistryError(
                f"plugin {plugin!r}: {hook} registered {obj.__qualname__} whose 'name' is "
                f"{name!r}; set a class attribute name = 'lowercase_name' (letters, digits, _ or -)"
            )
        from pydantic import BaseModel

        config = config_model(obj)
        if not (isinstance(config, type) and issubclass(config, BaseModel)):
            raise RegistryError(
                f"plugin {plugin!r}: {obj.__qualname__}.Config must be a pydantic BaseModel "
                f"subclass, got {config!r}"
            )
        return name

    def names(self) -> list[str]:
        return sorted(self.entries)

    def resolve(self, name: str, *, config_key: str) -> Registration[T]:
        """The registration for ``name``; errors list the alternatives and name both owners."""
        if name in self.conflicts:
            owners = " and ".join(repr(p) for p in self.conflicts[name])
            raise RegistryError(
                f"{config_key}: {self.label} {name!r} is registered by {owners}; "
                "disable all but one of them with 'hermes-core plugins disable NAME'"
            )
        reg = self.entries.get(name)
        if reg is None:
            available = ", ".join(self.names()) or "none"
            hint = ""
            if name in self.disabled_hint:
                hint = (
                    f" Plugin {self.disabled_hint[name]!r} provides it but is disabled: "
                    f"run 'hermes-core plugins enable {self.disabled_hint[name]}'."
                )
            raise UnknownNameError(
                f"{config_key}: unknown {self.label} {name!r}. Available: {available}. "
                f"The plugin that provides it may not be installed "
                f"(hermes-core plugins install ...).{hint}"
            )
        return reg


@dataclass
class Registries:
    memory_providers: Registry[type] = field(default_factory=lambda: Registry("memory-provider"))
    context_engines: Registry[type] = field(default_factory=lambda: Registry("context-engine"))
    tools: Registry[Tool] = field(default_factory=lambda: Registry("tool"))
    platforms: Registry[type] = field(default_factory=lambda: Registry("platform"))
    embedders: Registry[type] = field(default_factory=lambda: Registry("embedder"))
    llm_clients: Registry[type] = field(default_factory=lambda: Registry("llm-client"))

    def by_kind(self, kind: str) -> Registry[Any]:
        registries: dict[str, Registry[Any]] = {
            "memory-provider": self.memory_providers,
            "context-engine": self.context_engines,
            "tool": self.tools,
            "platform": self.platforms,
            "embedder": self.embedders,
            "llm-client": self.llm_clients,
        }
        return registries[kind]

    def config_owners(self) -> dict[str, tuple[str, type[BaseModel], str]]:
        """config section -> (class name, Config model, plugin) for every registered class."""
        out: dict[str, tuple[str, type[BaseModel], str]] = {}
        for registry in (self.memory_providers, self.context_engines, self.platforms,
                         self.embedders, self.llm_clients):
            for reg in registry.entries.values():
                cls = reg.obj
                section = getattr(cls, "config_section", None) or reg.name
                out.setdefault(section, (reg.name, config_model(cls), reg.plugin))
        return out

    def section_settings(self, section: str, config: LoadedConfig) -> Any:
        """The validated settings of the plugin config ``section`` (raises ConfigError)."""
        from .config import validate_section

        _name, model, plugin = self.config_owners()[section]
        return validate_section(config, section, model, plugin=plugin)

    def config_problems(self, config: LoadedConfig) -> list[tuple[str, str]]:
        """(key, message) for each problem of the plugin sections and selections of ``config``
        against what is registered; empty when valid."""
        from .config import CORE_SECTIONS

        owners = self.config_owners()
        problems: list[tuple[str, str]] = []
        for section in config.plugin_sections:
            if section not in owners:
                allowed = ", ".join([*CORE_SECTIONS, *sorted(owners)])
                problems.append((section, (
                    f"{config.where(section)}: unknown top-level key {section!r}: no loaded "
                    f"plugin uses it (is its plugin disabled or not installed?). "
                    f"Allowed: {allowed}"
                )))
                continue
            try:
                self.section_settings(section, config)
            except ConfigError as exc:
                problems.append((section, str(exc)))
        core = config.core
        selections: list[tuple[str, Registry[Any], str]] = [
            ("context.engine", self.context_engines, core.context.engine)]
        selections += [(f"memory.providers[{i}]", self.memory_providers, name)
                       for i, name in enumerate(core.memory.providers)]
        raw_llm = config.raw.get("llm")
        if isinstance(raw_llm, dict) and raw_llm.get("client"):  # the default is checked at start
            selections.append(("llm.client", self.llm_clients, core.llm.client))
        if core.llm.auxiliary_client:
            selections.append(("llm.auxiliary_client", self.llm_clients, core.llm.auxiliary_client))
        if core.embeddings.embedder not in ("auto", "none"):  # the two choices of no name
            selections.append(("embeddings.embedder", self.embedders, core.embeddings.embedder))
        checked = set(config.plugin_sections)
        skipped = {name for _i, name in self.skipped_providers(config)}
        for key, registry, name in selections:
            try:
                reg = registry.resolve(name, config_key=f"{config.where(key.split('[')[0])}: {key}")
            except UnknownNameError as exc:
                if not (registry is self.memory_providers and name in skipped):
                    problems.append((f"{key}={name}", str(exc)))
                continue  # a disabled plugin's provider is skipped: a warning (unused_settings)
            except HermesCoreError as exc:  # conflicting name
                problems.append((f"{key}={name}", str(exc)))
                continue
            # a selected plugin whose section is absent runs on its defaults: they must do
            section = getattr(reg.obj, "config_section", None) or reg.name
            if section in checked or section not in owners:
                continue
            checked.add(section)
            try:
                self.section_settings(section, config)
            except ConfigError as exc:
                problems.append((section, (
                    f"{key} selects {name!r}, which cannot run on its defaults: {exc}\n"
                    f"Set what its section {section!r} requires first "
                    f"(hermes-core config set {section}.FIELD VALUE), then select it")))
        return problems

    def skipped_providers(self, config: LoadedConfig) -> list[tuple[int, str]]:
        """``(index, name)`` of the ``memory.providers`` no loaded plugin provides because their
        plugin is disabled (``plugins.disabled``, ``HERMES_CORE_DISABLE_PLUGINS``) or left out by
        ``plugins.enabled_only``: a session skips them with a warning (not in strict mode)."""
        import re

        from .loader import allowed_names, blocked_names, strict_mode

        if strict_mode():
            return []
        blocked = blocked_names(config.core.plugins.disabled)
        allowed = allowed_names(config.core.plugins.enabled_only)
        out = []
        for i, name in enumerate(config.core.memory.providers):
            normal = re.sub(r"[-_.]+", "-", name).lower()
            if name not in self.memory_providers.entries and (
                    normal in blocked or (allowed is not None and normal not in allowed)):
                out.append((i, name))
        return out

    def unused_settings(self, config: LoadedConfig) -> list[str]:
        """Warnings for settings that have no effect as the config stands: a memory provider
        listed in ``memory.providers`` whose plugin is disabled (:meth:`skipped_providers`), and
        fields a provider's Config marks ``json_schema_extra={"needs_provider": True}``
        (``mcp.servers``), set in config.yaml while the provider is not selected."""
        selected = set(config.core.memory.providers)
        out: list[str] = [
            f"{config.where('memory.providers')}: memory.providers[{i}] selects {name!r}, whose "
            f"plugin is disabled, so sessions skip it: enable the plugin (hermes-core plugins "
            f"enable {name}) or remove {name} from memory.providers"
            for i, name in self.skipped_providers(config)]
        for name, reg in sorted(self.memory_providers.entries.items()):
            section = getattr(reg.obj, "config_section", None) or name
            raw = config.raw.get(section)
            if name in selected or not isinstance(raw, dict):
                continue
            model = config_model(reg.obj)
            for key, info in model.model_fields.items():
                extra = info.json_schema_extra
                if raw.get(key) and isinstance(extra, dict) and extra.get("needs_provider"):
                    out.append(f"{config.where(f'{section}.{key}')}: {section}.{key} is set, but {name!r} is "
                               f"not in memory.providers, so it has no effect: add {name} to "
                               f"memory.providers (or remove {section}.{key})")
        return out

