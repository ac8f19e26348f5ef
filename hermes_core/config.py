"""config.yaml: the core sections, per-plugin sections, validation and redaction.

The file has core sections (``memory``, ``context``, ``llm``, ``plugins``) validated here, and one
section per plugin class, validated by that class's ``Config`` model once the plugins are known
(:func:`validate_section`). The core sections' models are defined in ``_config_sections`` and
imported from here. Every model refuses unknown keys. Errors name the file, the key,
the line where known, the plugin, and what is allowed.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr, ValidationError

from ._config_sections import (
    CORE_SECTIONS,
    DEFAULT_HOOK_TIMEOUTS,
    ContextSection,
    CoreConfig,
    HooksSection,
    LLMSection,
    LoggingSection,
    MemorySection,
    PluginsSection,
    StorageSection,
)
from ._config_sections import DelegationSection as DelegationSection
from ._config_sections import EmbeddingsSection as EmbeddingsSection
from ._config_sections import StrictModel as StrictModel
from .errors import ConfigError
from .paths import config_path

if TYPE_CHECKING:
    import yaml

__all__ = [
    "CORE_SECTIONS",
    "DEFAULT_HOOK_TIMEOUTS",
    "ContextSection",
    "CoreConfig",
    "HooksSection",
    "LLMSection",
    "LoadedConfig",
    "LoggingSection",
    "MemorySection",
    "PluginsSection",
    "StorageSection",
    "check_config_text",
    "file_values_only",
    "format_validation_error",
    "key_problems",
    "load_config",
    "parse_config_text",
    "redacted",
    "validate_section",
]

REDACTED = "**********"
#: a key is secret when one of its ``_``/``-`` separated words is one of these
_SECRET_WORDS = frozenset(
    {"key", "apikey", "secret", "token", "password", "passwd", "credential", "credentials", "dsn",
     # HTTP headers and environment variables that carry credentials (an MCP server's headers and
     # env): Authorization, Proxy-Authorization, Cookie, X-Auth, GITHUB_PAT
     "authorization", "auth", "cookie", "pat"}
)




@dataclass
class LoadedConfig:
    """A parsed and core-validated config file."""

    path: Path
    core: CoreConfig
    #: the raw mapping as read (after environment overrides), core sections included
    raw: dict[str, Any]
    #: line numbers (1-based) of keys, by dotted path
    lines: dict[str, int] = field(default_factory=dict)
    exists: bool = True

    @property
    def plugin_sections(self) -> dict[str, Any]:
        return {k: v for k, v in self.raw.items() if k not in CORE_SECTIONS}

    def where(self, dotted: str) -> str:
        """``config.yaml line 4`` style location of a key, or just the file."""
        parts = dotted.split(".")
        while parts:
            line = self.lines.get(".".join(parts))
            if line is not None:
                return f"{self.path}, line {line}"
            parts.pop()
        return str(self.path)


def _duplicate_key(node: yaml.Node | None, prefix: str = "") -> tuple[str, int, int] | None:
    """The first key given twice in one mapping: ``(dotted key, first line, second line)``.

    PyYAML keeps the last value silently (and the round-trip editor refuses the file), so the
    config would not be what it reads like."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
                continue
            key, line = f"{prefix}{key_node.value}", key_node.start_mark.line + 1
            if key in seen:
                return key, seen[key], line
            seen[key] = line
            found = _duplicate_key(value_node, key + ".")
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found = _duplicate_key(item, prefix)
            if found:
                return found
    return None


def _key_lines(node: yaml.Node | None, prefix: str = "") -> dict[str, int]:
    """Map each mapping key's dotted path to its 1-based line."""
    import yaml

    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}{key_node.value}"
            lines[key] = key_node.start_mark.line + 1
            lines.update(_key_lines(value_node, key + "."))
    return lines


#: False while an edit of config.yaml is checked: the file's own values must be valid, whatever
#: the environment would put in their place when the config is loaded (see :func:`file_values_only`)
_ENV_APPLIES: contextvars.ContextVar[bool] = contextvars.ContextVar("env_applies", default=True)


@contextlib.contextmanager
def file_values_only() -> Iterator[None]:
    """Within this block, loading and validating a config ignores the environment overrides, so
    a value written to config.yaml is judged by itself (an environment variable set today must
    not let a bad value into the file, where it would apply once the variable is gone)."""
    token = _ENV_APPLIES.set(False)
    try:
        yield
    finally:
        _ENV_APPLIES.reset(token)


def _env_overrides(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """Apply environment variables declared on fields (``json_schema_extra={"env": NAME}``)."""
    out = dict(data)
    if not _ENV_APPLIES.get():
        return out
    for fname, finfo in model.model_fields.items():
        extra = finfo.json_schema_extra
        env = extra.get("env") if isinstance(extra, dict) else None
        if isinstance(env, str) and os.environ.get(env):
            out[fname] = os.environ[env]
    return out


def apply_env(model: type[BaseModel], data: Mapping[str, Any] | None) -> dict[str, Any]:
    """``data`` with the model's environment overrides applied (also for plugin sections)."""
    return _env_overrides(model, dict(data or {}))


def validate_section(
    config: LoadedConfig, section: str, model: type[BaseModel], *, plugin: str
) -> Any:
    """Validate one plugin section of ``config`` with ``model`` (its defaults when absent).

    Environment overrides declared on the model apply; errors name the file, key, line and plugin.
    """
    remember_model(model)
    raw = config.raw.get(section)
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(
            f"{config.where(section)}: section {section!r} (plugin {plugin!r}) must be a "
            f"mapping, not {type(raw).__name__}"
        )
    try:
        return model.model_validate(apply_env(model, raw))
    except ValidationError as exc:
        raise ConfigError(
            format_validation_error(exc, section=section, where=config, plugin=plugin)
        ) from None


def format_validation_error(
    exc: ValidationError,
    *,
    section: str | None,
    where: LoadedConfig | None,
    plugin: str | None = None,
) -> str:
    """Render a pydantic error as lines naming file, key, line, plugin and the allowed values."""
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        dotted = ".".join(([section] if section else []) + loc)
        place = where.where(dotted) if where else "config"
        owner = f" (plugin {plugin!r})" if plugin else ""
        if err["type"] == "extra_forbidden":
            fields = _model_at(exc, err["loc"][:-1])
            msg = f"unknown key {dotted!r}{owner}"
            if fields is not None:
                import difflib

                close = difflib.get_close_matches(loc[-1] if loc else "", fields, n=1)
                if close:
                    msg += f" (did you mean {close[0]!r}?)"
                msg += f"; allowed keys here: {', '.join(fields) if fields else 'none'}"
        else:
            msg = f"{dotted}{owner}: {err['msg']}"
            if "input" in err and err["type"] != "missing" and not _looks_secret(dotted):
                msg += f" (got {redacted(err['input'], loc[-1] if loc else '')!r})"
        out.append(f"{place}: {msg}")
    return "\n".join(out)


def _model_at(exc: ValidationError, loc: tuple[Any, ...]) -> list[str] | None:
    """Field names of the model at ``loc`` within the model that raised ``exc`` (None when
    that model is not known: then no list is claimed)."""
    model = _MODELS_BY_TITLE.get(exc.title)
    for part in loc:
        if model is None:
            return None
        finfo = model.model_fields.get(str(part))
        ann = finfo.annotation if finfo else None
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return list(model.model_fields) if model else None


_MODELS_BY_TITLE: dict[str, type[BaseModel]] = {}


def remember_model(model: type[BaseModel]) -> None:
    """Let error messages list the allowed keys of ``model`` (plugin config models)."""
    _MODELS_BY_TITLE[model.__name__] = model


remember_model(CoreConfig)
for _field in CoreConfig.model_fields.values():  # core sections are validated one by one too
    if isinstance(_field.annotation, type) and issubclass(_field.annotation, BaseModel):
        remember_model(_field.annotation)


def _looks_secret(dotted: str) -> bool:
    last = dotted.rsplit(".", 1)[-1].lower()
    return not _SECRET_WORDS.isdisjoint(re.split(r"[_\-\s]+", last))


def _yaml_document(text: str, path: Path) -> tuple[yaml.Node | None, Any]:
    """The YAML node tree and data of config text; :class:`ConfigError` for malformed YAML,
    naming the line but never a value (it may be a secret)."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(
            f"{path}{line}: malformed YAML: {problem}. Fix the syntax "
            f"(or run 'hermes-core config validate' to recheck)."
        ) from None
    return node, data


def _duplicate_key_problem(node: yaml.Node | None, path: Path) -> str | None:
    """The error for a key given twice in one mapping of config text, or None.

    Loading keeps the last value (YAML's rule), but the file does not say what it seems to, and
    ``config set`` cannot edit it: ``config validate`` reports it, and the editor refuses with it.
    """
    twice = _duplicate_key(node)
    if twice is None:
        return None
    key, first, second = twice
    return (f"{path}, line {second}: key {key!r} is given twice (first on line {first}); only "
            "the last counts, and 'config set' cannot edit the file until one of the two lines "
            "is deleted")


def parse_config_text(text: str, path: Path) -> LoadedConfig:
    """Parse and validate the core sections of config text; raise :class:`ConfigError`."""
    node, data = _yaml_document(text, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a mapping of sections (memory:, context:, llm:, ...), "
            f"not a {type(data).__name__}"
        )
    bad_keys = [k for k in data if not isinstance(k, str)]
    if bad_keys:
        raise ConfigError(f"{path}: top-level key {bad_keys[0]!r} is not a string")
    loaded = LoadedConfig(path=path, core=CoreConfig(), raw=data, lines=_key_lines(node))
    core_raw: dict[str, Any] = {}
    for name in CORE_SECTIONS:
        section = data.get(name)
        if section is not None and not isinstance(section, dict):
            raise ConfigError(
                f"{loaded.where(name)}: section {name!r} must be a mapping, "
                f"not {type(section).__name__}"
            )
        model = CoreConfig.model_fields[name].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        core_raw[name] = apply_env(model, section)
    try:
        loaded.core = CoreConfig.model_validate(core_raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, section=None, where=loaded)) from None
    return loaded


def check_config_text(text: str, path: Path) -> tuple[LoadedConfig | None, list[str]]:
    """Every problem of the core sections at once, and the config with the bad values dropped.

    ``parse_config_text`` stops at the first section that fails; ``config validate`` wants them
    all, and a config to check the plugin sections and selections against. Returns ``(None,
    [error])`` when the file cannot be parsed at all (malformed YAML, not a mapping).
    """
    try:
        loaded = parse_config_text(text, path)
    except ConfigError as exc:
        first = str(exc).splitlines()
    else:
        twice = _duplicate_key_problem(_yaml_document(text, path)[0], path)
        return loaded, [twice] if twice else []
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None, first
    if not isinstance(data, dict) or any(not isinstance(k, str) for k in data):
        return None, first
    twice = _duplicate_key_problem(yaml.compose(text, Loader=yaml.SafeLoader), path)
    errors: list[str] = [twice] if twice else []
    cleaned = dict(data)
    probe = LoadedConfig(path=path, core=CoreConfig(), raw=data,
                         lines=_key_lines(yaml.compose(text, Loader=yaml.SafeLoader)))
    for name in CORE_SECTIONS:
        section = data.get(name)
        if section is None:
            continue
        if not isinstance(section, dict):
            errors.append(f"{probe.where(name)}: section {name!r} must be a mapping, "
                          f"not {type(section).__name__}")
            cleaned.pop(name)
            continue
        model = CoreConfig.model_fields[name].annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        try:
            model.model_validate(apply_env(model, section))
        except ValidationError as exc:
            errors.extend(format_validation_error(exc, section=name, where=probe).splitlines())
            bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
            cleaned[name] = {k: v for k, v in section.items() if k not in bad}
    loaded = LoadedConfig(path=path, core=CoreConfig(), raw=cleaned, lines=probe.lines)
    try:
        core_raw = {n: apply_env(CoreConfig.model_fields[n].annotation,  # type: ignore[arg-type]
                                 cleaned.get(n)) for n in CORE_SECTIONS}
        loaded.core = CoreConfig.model_validate(core_raw)
    except ValidationError:
        return None, errors or first
    return loaded, errors or first


def key_problems(
    loaded: LoadedConfig, key: str, owners: Mapping[str, tuple[str, type[BaseModel], str]]
) -> list[str]:
    """Problems of the value at dotted ``key`` itself in ``loaded`` (a plugin section's key).

    ``config set`` refuses a new value that is invalid even when the section already had other
    problems (those do not block an unrelated change, but the key being set must be right).
    """
    section, _, rest = key.partition(".")
    if section in CORE_SECTIONS or section not in owners:
        return []
    _name, model, plugin = owners[section]
    raw = loaded.raw.get(section)
    if not isinstance(raw, dict):
        return []
    try:
        model.model_validate(apply_env(model, raw))
    except ValidationError as exc:
        wanted = rest.split(".") if rest else []
        mine = [e for e in exc.errors()
                if [str(p) for p in e["loc"]][: len(wanted)] == wanted]
        if mine:
            lines = format_validation_error(exc, section=section, where=loaded, plugin=plugin)
            keep = []
            for err, line in zip(exc.errors(), lines.splitlines(), strict=False):
                if err in mine:
                    keep.append(line)
            return keep
    return []


def load_config(home: Path | None = None, *, path: Path | None = None) -> LoadedConfig:
    """Read ``config.yaml`` (a missing file means all defaults)."""
    path = path or config_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        loaded = parse_config_text("", path)
        loaded.exists = False
        return loaded
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file: {exc}") from None
    return parse_config_text(text, path)



def load_copied_config(scratch: Path, real: Path) -> LoadedConfig:
    """The config of a scratch home (``replay``, ``eval``) whose ``config.yaml`` is a copy of
    ``real``'s, maybe with edits: its errors name the user's file and its line numbers, never
    the throwaway copy (a key only the edits added is named without a line)."""
    original = config_path(real)
    copy = config_path(scratch)
    try:
        loaded = load_config(scratch)
    except ConfigError as exc:
        if original.is_file():
            load_config(real)  # the user's own file's error, with its own line numbers
        raise ConfigError(str(exc).replace(str(copy), str(original))) from None
    if original.is_file():
        loaded.path = original
        try:
            loaded.lines = load_config(real).lines
        except ConfigError:
            loaded.lines = {}
    return loaded

#: an HTTP authorization value: a scheme word, then the credential
_AUTH_SCHEME = re.compile(r"\s*(?:bearer|basic|token|digest|apikey)\s+\S{8,}", re.IGNORECASE)


def _holds_credential(value: str) -> bool:
    """Whether ``value`` is (or holds) a credential whatever its key: ``Bearer <token>`` and the
    like, or a known key format (``sk-...``, ``ghp_...``, ``AKIA...``). A value made only of
    ``${NAME}`` references holds none (the variable's value is not in the config)."""
    if _AUTH_SCHEME.match(value):
        return not _ONLY_REFERENCES.fullmatch(value.split(None, 1)[1])
    from .compaction.redact import holds_key

    return holds_key(value)


_ONLY_REFERENCES = re.compile(r"(?:\$\{[A-Za-z_][A-Za-z0-9_]*\}\s*)+")


#: a command-line flag (``--api-key``), and an assignment (``--token=VALUE``, ``DB_PASSWORD=VALUE``)
_FLAG = re.compile(r"-{1,2}([A-Za-z][\w-]*)")
_ASSIGNMENT = re.compile(r"(-{0,2}([A-Za-z][\w-]*)\s*=)(.+)", re.DOTALL)


def _redacted_list(items: list[Any], key: str) -> list[Any]:
    """A list's items redacted; in a command line (``args``), the value after a flag naming a
    secret (``--api-key VALUE``) too."""
    out: list[Any] = []
    after_secret_flag = False
    for item in items:
        if after_secret_flag and isinstance(item, str) and not _FLAG.fullmatch(item):
            out.append(REDACTED)
        else:
            out.append(redacted(item, key))
        flag = _FLAG.fullmatch(item) if isinstance(item, str) else None
        after_secret_flag = flag is not None and _looks_secret(flag.group(1))
    return out


def redacted(data: Any, key: str = "") -> Any:
    """A copy of ``data`` with secret-looking values replaced, for printing."""
    if isinstance(data, SecretStr):
        return REDACTED
    if isinstance(data, dict):
        return {k: redacted(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return _redacted_list(data, key)
    if data not in (None, "") and _looks_secret(key):
        return REDACTED
    assigned = _ASSIGNMENT.fullmatch(data) if isinstance(data, str) else None
    if (assigned and _looks_secret(assigned.group(2))
            and not _ONLY_REFERENCES.fullmatch(assigned.group(3).strip())):
        return assigned.group(1) + REDACTED  # --token=VALUE, DB_PASSWORD=VALUE: the name stays
    if isinstance(data, str) and _holds_credential(data):
        return REDACTED  # a bearer token or a known key format, under any key (a header, env)
    if isinstance(data, str) and ("://" in data or "@" in data or "password" in data.lower()):
        from .storage.url import redact_url, redact_url_value

        # one URL-like value (maybe malformed: a slash missing, a space or '@' in its password)
        return redact_url_value(data) if key == "url" else redact_url(data)
    return data


def get_dotted(data: Any, key: str) -> Any:
    """The value at dotted ``key`` in nested mappings; ``KeyError`` names the missing part."""
    node = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(part)
        node = node[part]
    return node


def effective_dict(
    loaded: LoadedConfig, plugin_defaults: Iterable[tuple[str, BaseModel]] = ()
) -> dict[str, Any]:
    """The config as the kernel sees it: defaults filled in, secrets still as SecretStr."""
    out: dict[str, Any] = {}
    for name in CORE_SECTIONS:
        out[name] = dict(getattr(loaded.core, name))
    for section, model in plugin_defaults:
        out[section] = dict(model)
    for section, raw in loaded.plugin_sections.items():
        out.setdefault(section, raw)
    return out
