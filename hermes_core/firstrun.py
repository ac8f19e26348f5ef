"""The first run: what ``hermes-core setup`` offers, the config.yaml it writes, and its check.

``hermes-core setup`` (a click layer, :mod:`hermes_core.cli.setup_cmd`) asks its questions (or
takes them as flags) and hands the answers here:

* :func:`catalog` lists what can be chosen, from the registries of the loaded host: the model
  clients (``llm-client``), the memory providers (built-in, installed, Hermes plugins when the
  bridge registers them) and the embedders, each with where it comes from;
* :func:`client_info` says where a client keeps its key, its key's environment variable and its
  base URL, read from the client's ``Config`` model;
* :func:`render_config` edits the existing text (comments, order and every other section kept);
  :func:`new_problems` checks the result as ``config validate`` does (refusing what the edit
  would break), and :func:`write_config` keeps the old file as ``config.yaml.bak`` and replaces
  the file atomically;
* :func:`model_check` sends one tiny request through the configured client, bounded by a short
  deadline, and says clearly what failed: which client, which base URL, which variable.
"""

from __future__ import annotations

import difflib
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import LLMSection
from .config_edit import (
    check_config_file_text,
    config_lock,
    edit_config_text,
    write_config_text,
)
from .errors import ConfigError

if TYPE_CHECKING:
    from .host import PluginHost
    from .registry import Registries

__all__ = ["Answers", "Catalog", "Choice", "ClientInfo", "catalog", "client_info",
           "config_diff", "malformed_reason", "model_check", "new_problems", "render_config",
           "write_config"]

#: the embedder settings that are not plugin names
EMBEDDER_WORDS = {"auto": "the local MiniLM embedder when installed, else word search only",
                  "none": "word search only"}
#: the one client whose connection is ``llm.base_url`` / ``llm.api_key``: the default client
_LLM_SECTION_CLIENT = LLMSection.model_fields["client"].default
#: what ``setup --check`` asks the model
_PING = "Reply with the single word OK."


@dataclass(frozen=True, slots=True)
class Choice:
    """One thing that can be picked: its name, where it comes from, what it is."""

    name: str
    origin: str
    description: str = ""


@dataclass
class Catalog:
    clients: list[Choice] = field(default_factory=list)
    providers: list[Choice] = field(default_factory=list)
    embedders: list[Choice] = field(default_factory=list)

    def names(self, what: str) -> list[str]:
        choices: list[Choice] = getattr(self, what)
        return [c.name for c in choices]

    def as_dict(self) -> dict[str, list[dict[str, str]]]:
        return {what: [asdict(c) for c in getattr(self, what)]
                for what in ("clients", "providers", "embedders")}


@dataclass
class Answers:
    """What setup writes; ``None`` leaves the setting as the file has it."""

    client: str
    model: str
    providers: list[str]
    embedder: str
    scope: str
    #: ``""`` removes the setting (the client's default endpoint)
    base_url: str | None = None
    api_key_env: str | None = None
    #: written only when the user asked (``--store-key``)
    api_key: str | None = None


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """Where a client's settings live in config.yaml."""

    name: str
    #: the environment variable the key is read from (None: the client needs no key)
    key_env: str | None
    #: dotted key naming the variable (None: the variable is fixed)
    key_env_setting: str | None
    #: dotted key of a key written into the file (None: it cannot be stored)
    key_setting: str | None
    base_url_setting: str | None
    default_model: str | None


def _origin(host: PluginHost, plugin: str) -> str:
    record = host.records.get(plugin)
    if record is None or record.source == "builtin":
        return "built-in"
    if record.distribution:
        version = f" {record.version}" if record.version else ""
        return f"installed: {record.distribution}{version}"
    return f"{record.source} plugin {plugin}"


def _choices(host: PluginHost, registry: Any) -> list[Choice]:
    out = []
    for name in registry.names():
        reg = registry.entries[name]
        lines = str(getattr(reg.obj, "description", "") or "").strip().splitlines()
        out.append(Choice(name, _origin(host, reg.plugin), lines[0] if lines else ""))
    return out


def catalog(host: PluginHost) -> Catalog:
    """Everything the loaded host offers for the questions of setup."""
    regs = host.registries
    return Catalog(
        clients=_choices(host, regs.llm_clients),
        providers=_choices(host, regs.memory_providers),
        embedders=[*(Choice(word, "setting", text) for word, text in EMBEDDER_WORDS.items()),
                   *_choices(host, regs.embedders)],
    )


def _env_of(model: type[Any], field_name: str) -> str | None:
    extra = model.model_fields[field_name].json_schema_extra
    env = extra.get("env") if isinstance(extra, dict) else None
    return env if isinstance(env, str) else None


def client_info(registries: Registries, name: str) -> ClientInfo:
    """Where client ``name`` keeps its key and base URL (raises when it is not installed)."""
    cls = registries.llm_clients.resolve(name, config_key="llm.client").obj
    if name == _LLM_SECTION_CLIENT:
        return ClientInfo(name, _env_of(LLMSection, "api_key"), None, "llm.api_key",
                          "llm.base_url", LLMSection.model_fields["model"].default)
    default_model = getattr(cls, "default_model", None)
    section = getattr(cls, "config_section", None) or name
    config_model: Any = getattr(cls, "Config", None)
    fields = getattr(config_model, "model_fields", {})
    key_env = None
    if "api_key_env" in fields:
        key_env = fields["api_key_env"].default
    elif "api_key" in fields:
        key_env = _env_of(config_model, "api_key")
    return ClientInfo(
        name, key_env if isinstance(key_env, str) else None,
        f"{section}.api_key_env" if "api_key_env" in fields else None,
        f"{section}.api_key" if "api_key" in fields else None,
        f"{section}.base_url" if "base_url" in fields else None,
        default_model if isinstance(default_model, str) else None)


def malformed_reason(text: str, path: Path) -> str | None:
    """Why ``text`` cannot be edited (malformed YAML, not a mapping), or None when it can."""
    try:
        edit_config_text(text, path, "memory", {}, unset=True)
    except ConfigError as exc:
        return str(exc)
    return None


def render_config(old: str, path: Path, answers: Answers, info: ClientInfo) -> str:
    """``old`` with the answers written in: comments, order and every other section kept."""
    text = old
    edits: list[tuple[str, Any]] = [("llm.client", answers.client), ("llm.model", answers.model),
                                    ("memory.providers", list(answers.providers)),
                                    ("memory.scope", answers.scope),
                                    ("embeddings.embedder", answers.embedder)]
    if answers.base_url is not None and info.base_url_setting:
        edits.append((info.base_url_setting, answers.base_url or None))
    if answers.api_key_env is not None and info.key_env_setting:
        edits.append((info.key_env_setting, answers.api_key_env))
    if answers.api_key is not None:
        if info.key_setting is None:
            raise ConfigError(f"client {info.name!r} has no key setting to store a key in")
        edits.append((info.key_setting, answers.api_key))
    for key, value in edits:
        text = edit_config_text(text, path, key, value, unset=value is None)
    return text


_SECRET_LINE = re.compile(r"^(?P<head>[-+ ]?\s*(?:-\s+)?(?P<key>[\w.-]+)\s*:\s*)(?P<value>\S.*)$")


def _masked(line: str) -> str:
    from .config import REDACTED, _looks_secret

    match = _SECRET_LINE.match(line)
    if match and _looks_secret(match["key"]):
        return f"{match['head']}{REDACTED}\n"
    return line


def config_diff(old: str, new: str, path: Path) -> str:
    """The unified diff from ``old`` to ``new``, secrets' values masked."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"{path.name} (now)", tofile=f"{path.name} (new)")
    return "".join(_masked(line if line.endswith("\n") else line + "\n") for line in lines)


def backup_path(path: Path, old: str | None = None) -> Path:
    """Where the old file is kept: ``config.yaml.bak``, or (when that holds something else)
    the first free ``config.yaml.bak.N``, so an earlier backup is not lost either."""
    candidate = path.with_name(path.name + ".bak")
    n = 0
    while candidate.exists():
        try:
            if old is not None and candidate.read_text(encoding="utf-8") == old:
                break
        except (OSError, UnicodeDecodeError):
            pass
        n += 1
        candidate = path.with_name(f"{path.name}.bak.{n}")
    return candidate


_WHERE = re.compile(r", line \d+(?:, column \d+)?")


def new_problems(path: Path, old: str | None, new: str) -> list[str]:
    """Check ``new`` as ``config validate`` would; raise :class:`ConfigError` naming the problems
    it has that ``old`` did not have. Returns the problems both have (the old file's own, e.g. the
    section of a plugin that is not installed: they do not block setup, and are reported)."""
    errors = check_config_file_text(new, path).errors
    had = set()
    if errors and old is not None and malformed_reason(old, path) is None:
        had = {_WHERE.sub("", e) for e in check_config_file_text(old, path).errors}
    added = [e for e in errors if _WHERE.sub("", e) not in had]
    if added:
        raise ConfigError("the config setup would write is not valid:\n  "
                          + "\n  ".join(added) + f"\n{path} was not changed.")
    return [e for e in errors if e not in added]


def write_config(path: Path, old: str | None, new: str) -> Path | None:
    """Keep ``old`` (when there is a file) as a backup (mode 0600), then replace the file
    atomically (mode 0600). Returns the backup's path.

    Holds config.yaml's lock (:func:`~hermes_core.config_edit.config_lock`) and writes nothing
    when the file is no longer ``old`` (another command changed it since it was read): the
    change shown would drop that edit."""
    from .atomic import atomic_write

    with config_lock(path):
        try:
            now: str | None = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            now = None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}; nothing was written") from None
        if now != old:
            raise ConfigError(
                f"{path} changed while setup was running (another command edited it); nothing "
                "was written, so that change is kept: run setup again to see the new diff")
        backup = None
        if old is not None:
            backup = backup_path(path, old)
            try:
                atomic_write(backup, old.encode("utf-8"))
            except OSError as exc:
                raise ConfigError(f"cannot keep the old config as {backup}: "
                                  f"{exc.strerror or exc}; {path} was not changed") from None
        write_config_text(path, new)
    return backup


def _check(ok: bool, detail: str, fix: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "model", "ok": ok, "detail": detail}
    if fix:
        out["fix"] = fix
    return out


def model_check(host: PluginHost, *, timeout: float = 20.0) -> dict[str, Any]:
    """One tiny request through the configured client (``timeout`` bounds it, retries included),
    as a check in ``doctor``'s shape: what answered, or which client, base URL and step failed."""
    from .errors import HermesCoreError
    from .llm import LLMError, LLMFailure
    from .types import Message

    core = host.config.core
    name, model = core.llm.client, core.llm.model
    try:
        info = client_info(host.registries, name)
        client = host.llm("main")
    except HermesCoreError as exc:  # unknown name, invalid section, missing extra
        return _check(False, f"client {name!r} cannot be built: {exc}")
    where = _base_url(host, info, client)
    who = f"client {name}, model {model}, base URL {where}"
    started = time.monotonic()
    try:
        client.respond(system="", messages=[Message(role="user", content=_PING)], max_tokens=16,
                       timeout=timeout)
    except LLMError as exc:
        env = info.key_env or "the key's environment variable"
        if exc.failure is LLMFailure.NOT_CONFIGURED:
            return _check(False, f"{who}: no API key, so nothing was sent",
                          f"export {env}=... (the key of {name})")
        if exc.failure is LLMFailure.AUTH:
            return _check(False, f"{who}: the key was refused (HTTP {exc.status}): {exc}",
                          f"check the key in {env}")
        if exc.failure in (LLMFailure.CONNECTION, LLMFailure.TIMEOUT):
            return _check(False, f"{who}: the endpoint does not answer ({exc.failure}): {exc}",
                          "start the server, or fix the base URL"
                          + (f" ({info.base_url_setting})" if info.base_url_setting else ""))
        return _check(False, f"{who}: the request failed ({exc.failure}): {exc}")
    return _check(True, f"{who}: answered in {time.monotonic() - started:.2f} s")


def _base_url(host: PluginHost, info: ClientInfo, client: Any) -> str:
    url = getattr(client, "base_url", None)
    if not url and info.base_url_setting:
        from .config import get_dotted

        try:
            url = get_dotted(host.config.raw, info.base_url_setting)
        except KeyError:
            url = None
    return str(url) if url else "(the client's default endpoint)"
