"""config.yaml: the core sections, per-plugin sections, validation and redaction.

The file has core sections (``memory``, ``context``, ``llm``, ``plugins``) validated here, and one
section per plugin class, validated by that class's ``Config`` model once the plugins are known
(:func:`validate_section`). Every model refuses unknown keys. Errors name the file, the key,
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
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

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


class StrictModel(BaseModel):
    # defer_build: the validators are built on first use, not at import, which keeps
    # `import hermes_core.host` cheap for commands that never read the config.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class MemorySection(StrictModel):
    #: memory providers to activate, in order; each is a name registered by a plugin
    providers: list[str] = Field(
        default_factory=lambda: ["file_memory", "session_archive", "skills"]
    )
    #: ``global``: one curated memory for everyone; ``user``: one per user key (the webhook's
    #: ``user`` field, the OS user in the chat); the archive's search sees the user's sessions only
    scope: Literal["global", "user"] = "global"
    #: per-provider deadline for ``prefetch``, in seconds
    prefetch_timeout: float = Field(default=0.3, gt=0, le=30)
    #: seconds the background memory worker may take to finish queued writes at shutdown
    worker_drain_timeout: float = Field(default=10.0, ge=0, le=600)
    #: a background memory review runs after every this many user turns (0: never)
    nudge_interval: int = Field(default=10, ge=0, le=10_000)
    #: no review and no pre-compaction flush before the conversation has this many user turns
    flush_min_turns: int = Field(default=6, ge=0, le=10_000)
    #: ask the model to save what is worth keeping before each compaction
    flush_before_compaction: bool = True
    #: wall-clock bound of one review or flush, in seconds (a late answer is discarded)
    review_timeout: float = Field(default=60.0, gt=0, le=600)
    #: model calls one review may make (a flush always makes one)
    review_max_calls: int = Field(default=3, ge=1, le=16)
    #: output tokens allowed per review or flush call
    review_max_tokens: int = Field(default=1024, ge=64, le=32_000)
    #: estimated tokens of conversation a review or flush reads (older messages are left out)
    review_input_tokens: int = Field(default=24_000, ge=1_000, le=1_000_000)

    @field_validator("providers")
    @classmethod
    def _no_duplicates(cls, value: list[str]) -> list[str]:
        seen = [name for i, name in enumerate(value) if name in value[:i]]
        if seen:
            raise ValueError(f"provider {seen[0]!r} is listed twice; list each provider once")
        return value


class ContextSection(StrictModel):
    #: the one context engine; a name registered by a plugin
    engine: str = "compressor"


class LLMSection(StrictModel):
    #: the model client (a name registered through ``register_llm_clients``): ``anthropic``,
    #: ``openai`` or a third-party one; ``hermes-core plugins list`` shows the installed ones
    client: str = "anthropic"
    #: the client of the auxiliary model (summaries, memory reviews); ``None``: ``client``
    auxiliary_client: str | None = None
    model: str = "claude-sonnet-4-6"
    #: the model for summaries and reviews; defaults to ``model``
    auxiliary_model: str | None = None
    #: a Messages-API-compatible endpoint; env ANTHROPIC_BASE_URL
    base_url: str | None = Field(default=None, json_schema_extra={"env": "ANTHROPIC_BASE_URL"})
    #: env ANTHROPIC_API_KEY; prefer the environment to writing it here
    api_key: SecretStr | None = Field(default=None, json_schema_extra={"env": "ANTHROPIC_API_KEY"})
    max_tokens: int = Field(default=4096, gt=0)
    #: the model's context window in tokens; ``None`` means the kernel's table for known models
    context_window: int | None = Field(default=None, gt=0)
    timeout: float = Field(default=600.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    cache_ttl: Literal["5m", "1h"] = "5m"
    #: LLM calls one user turn may make (tool-loop iterations included)
    max_iterations: int = Field(default=90, ge=1, le=1000)


#: default deadline of each bounded hook, in seconds (``hooks.timeouts`` overrides per hook)
DEFAULT_HOOK_TIMEOUTS: dict[str, float] = {
    # on the turn's path
    "on_message": 2.0,
    "system_prompt_block": 2.0,
    "should_compress": 1.0,
    "update_from_response": 1.0,
    "on_turn_start": 1.0,
    "on_prompt_assembled": 1.0,
    "on_pre_compress": 10.0,
    "compress": 180.0,
    "on_post_compress": 5.0,
    "get_tools": 5.0,
    "load_session": 10.0,
    # on the background worker (a late provider delays only its own later calls)
    "sync_turn": 5.0,
    "queue_prefetch": 5.0,
    "on_session_switch": 5.0,
    "on_session_end": 5.0,
    "on_memory_write": 5.0,
    "on_delegation": 5.0,
    "forget": 30.0,
    "on_erasure": 2.0,
    # front ends and shutdown
    "connect": 30.0,
    "disconnect": 10.0,
    "send": 10.0,
    "shutdown": 5.0,
    # inspection commands
    "describe_context": 30.0,
    "doctor_checks": 60.0,  # each plugin's checks (an integrity check of a large archive)
}


class HooksSection(StrictModel):
    #: per-hook deadline in seconds, e.g. ``{on_message: 1.5}``; see DEFAULT_HOOK_TIMEOUTS
    timeouts: dict[str, float] = Field(default_factory=dict)
    #: deadline of one tool call, in seconds (the model gets a tool error when it passes)
    tool_timeout: float = Field(default=120.0, gt=0, le=3600)
    #: longest result of one tool call passed to the model, in characters (a longer one keeps
    #: its head and tail, with a note of what was left out)
    tool_result_chars: int = Field(default=50_000, ge=1_000, le=10_000_000)

    @field_validator("timeouts")
    @classmethod
    def _known_hooks(cls, value: dict[str, float]) -> dict[str, float]:
        import difflib

        for name, seconds in value.items():
            if name not in DEFAULT_HOOK_TIMEOUTS:
                close = difflib.get_close_matches(name, list(DEFAULT_HOOK_TIMEOUTS), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ValueError(f"{name!r} is not a bounded hook; {hint}"
                                 f"bounded hooks: {', '.join(sorted(DEFAULT_HOOK_TIMEOUTS))}")
            if not 0 < seconds <= 3600:
                raise ValueError(f"timeouts.{name} must be > 0 and <= 3600 seconds, got {seconds}")
        return value

    def timeout(self, hook: str) -> float:
        return self.timeouts.get(hook, DEFAULT_HOOK_TIMEOUTS.get(hook, 10.0))


class LoggingSection(StrictModel):
    #: level of the log file ``$HERMES_CORE_HOME/logs/hermes-core.log`` (``serve --log-level``)
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: write the log file at all
    file: bool = True
    #: bytes per file before it rotates, and how many old files are kept
    max_bytes: int = Field(default=1_000_000, ge=10_000, le=1_000_000_000)
    backups: int = Field(default=5, ge=0, le=100)
class StorageSection(StrictModel):
    #: where the built-in stores keep their data: unset = SQLite files in the home;
    #: ``postgresql://user:password@host:5432/dbname`` = one PostgreSQL database (docs/storage.md);
    #: env HERMES_CORE_STORAGE_URL
    url: str | None = Field(default=None, json_schema_extra={"env": "HERMES_CORE_STORAGE_URL"})

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from .storage.errors import StorageError
        from .storage.url import parse_storage_url

        try:
            return parse_storage_url(value).url
        except StorageError as exc:
            raise ValueError(str(exc)) from None

class EmbeddingsSection(StrictModel):
    #: the embedder for semantic search: a name registered by a plugin, ``auto`` (the local
    #: all-MiniLM-L6-v2 embedder when ``hermes-core-kernel[embeddings]`` is installed, else none) or
    #: ``none`` (word search only)
    embedder: str = "auto"
    #: seconds one embedding call may take before semantic search is skipped for that call
    timeout: float = Field(default=10.0, gt=0, le=600)
    #: texts embedded per call by background indexing
    batch_size: int = Field(default=32, ge=1, le=1024)

    @field_validator("embedder")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("give an embedder name, 'auto' or 'none'")
        return value


class DelegationSection(StrictModel):
    #: offer the ``delegate_task`` tool; ``false`` leaves it out of every session's tool list
    enabled: bool = True
    #: how deep children may delegate again: 1 = the main agent's children cannot delegate
    max_depth: int = Field(default=1, ge=1, le=5)
    #: children one ``delegate_task`` call runs at once; further tasks of the call are refused
    max_parallel: int = Field(default=3, ge=1, le=16)
    #: tools a child may use (names); ``None`` = every tool of the parent's session
    allowed_tools: list[str] | None = None
    #: model calls one child may make (it also spends the parent's turn budget, shared)
    child_max_iterations: int = Field(default=30, ge=1, le=1000)
    #: seconds a ``delegate_task`` call waits for its children before cancelling the rest
    timeout: float = Field(default=100.0, gt=0, le=3600)


class PluginsSection(StrictModel):
    #: plugin names (or distribution names) never imported
    disabled: list[str] = Field(default_factory=list)
    #: when set, an allow-list: only these plugins (names or distribution names) are imported;
    #: ``disabled`` still applies on top of it
    enabled_only: list[str] | None = None


class CoreConfig(StrictModel):
    memory: MemorySection = Field(default_factory=MemorySection)
    context: ContextSection = Field(default_factory=ContextSection)
    llm: LLMSection = Field(default_factory=LLMSection)
    plugins: PluginsSection = Field(default_factory=PluginsSection)
    hooks: HooksSection = Field(default_factory=HooksSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    storage: StorageSection = Field(default_factory=StorageSection)
    embeddings: EmbeddingsSection = Field(default_factory=EmbeddingsSection)
    delegation: DelegationSection = Field(default_factory=DelegationSection)


CORE_SECTIONS: tuple[str, ...] = tuple(CoreConfig.model_fields)


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


def parse_config_text(text: str, path: Path) -> LoadedConfig:
    """Parse and validate the core sections of config text; raise :class:`ConfigError`."""
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
        return parse_config_text(text, path), []
    except ConfigError as exc:
        first = str(exc).splitlines()
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None, first
    if not isinstance(data, dict) or any(not isinstance(k, str) for k in data):
        return None, first
    errors: list[str] = []
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


def redacted(data: Any, key: str = "") -> Any:
    """A copy of ``data`` with secret-looking values replaced, for printing."""
    if isinstance(data, SecretStr):
        return REDACTED
    if isinstance(data, dict):
        return {k: redacted(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redacted(v, key) for v in data]
    if data not in (None, "") and _looks_secret(key):
        return REDACTED
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
