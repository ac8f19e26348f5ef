"""Editing config.yaml: ``config set``/``unset`` and the eval harness's per-case settings.

Edits keep the file's comments and key order (a round-trip YAML parser), are validated before
anything is written (:func:`set_config_value` changes nothing when the result is refused), and
replace the file atomically, so a reader sees the old file or the new one, never a partial one.
Every read-modify-write of the file holds :func:`config_lock` (an ``flock`` on ``config.yaml.lock``
beside it), so two commands editing it at once both keep their change.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import (
    LoadedConfig,
    _duplicate_key_problem,
    _yaml_document,
    check_config_text,
    file_values_only,
    parse_config_text,
)
from .errors import ConfigError
from .private import private_dir

__all__ = ["ConfigReport", "check_config_file_text", "config_lock", "edit_config_text",
           "parse_cli_value", "set_config_value", "write_config_text"]

_HELD = threading.local()  # the config files this thread holds the lock of (so nesting is free)


@contextlib.contextmanager
def config_lock(path: Path) -> Iterator[None]:
    """Hold config.yaml's lock for a read-modify-write of ``path``.

    The lock is an exclusive ``flock`` on ``<file>.lock`` beside the file (beside the file a
    symbolic link points to, since that is the file replaced), taken through
    :func:`hermes_core.atomic.locked`: another process editing the file waits; the OS releases it
    when its holder exits or is killed. Within the block the same thread may take it again.
    """
    from .atomic import LockUnavailable, locked

    target = path.resolve() if path.is_symlink() else path
    key = os.path.abspath(target)
    held: set[str] = getattr(_HELD, "paths", None) or set()
    _HELD.paths = held
    if key in held:
        yield
        return
    with contextlib.ExitStack() as stack:
        try:
            private_dir(target.parent)
            stack.enter_context(locked(target))
        except (LockUnavailable, OSError) as exc:
            raise ConfigError(
                f"cannot write {target}: its edit lock cannot be taken ({exc.strerror or exc}). "
                "Nothing was changed; "
                f"check that {target.parent} is writable, then run the command again") from None
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)


def parse_cli_value(text: str) -> Any:
    """A ``config set`` value: YAML (so ``true``, ``3``, ``[a, b]`` work), else the plain string."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return text if value is None and text.strip() not in ("null", "~") else value


def _roundtrip() -> Any:
    from ruamel.yaml import YAML  # only config edits pay for the round-trip parser

    rt = YAML()
    rt.preserve_quotes = True
    rt.indent(mapping=2, sequence=4, offset=2)
    return rt


def edit_config_text(text: str, path: Path, key: str, value: Any, *, unset: bool = False) -> str:
    """Return ``text`` with ``key`` (dotted) set to ``value``, keeping comments and order."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import YAMLError

    rt = _roundtrip()
    try:
        doc = rt.load(text) if text.strip() else CommentedMap()
    except YAMLError as exc:
        # The round-trip parser's message quotes the lines (a secret among them): name the
        # problem the way loading the config does, by line, without the values.
        twice = _duplicate_key_problem(_yaml_document(text, path)[0], path)  # or malformed YAML
        if twice:
            raise ConfigError(twice) from None
        mark = getattr(exc, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: malformed YAML, fix it before editing") from None
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"invalid key {key!r}: use dotted names like 'context.engine'")
    node = doc
    for depth, part in enumerate(parts[:-1], 1):
        child = node.get(part)
        if child is None:
            if unset:
                return text
            child = node[part] = CommentedMap()
        if not isinstance(child, dict):
            holder = ".".join(parts[:depth])
            kind = ("a list" if isinstance(child, list) else "text" if isinstance(child, str)
                    else "a value")
            raise ConfigError(
                f"{path}: {holder!r} holds {kind}, not a section of keys, so {key!r} cannot be "
                f"set; set {holder!r} itself (hermes-core config set {holder} VALUE), or remove "
                f"it first (hermes-core config unset {holder})")
        node = child
    if unset:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    buf = io.StringIO()
    rt.dump(doc, buf)
    return buf.getvalue()


def write_config_text(path: Path, text: str) -> None:
    """Replace ``path`` atomically: a reader sees the old or the new file, never a partial one.

    A ``path`` that is a symbolic link stays one: the file it points to is replaced."""
    if path.is_symlink():
        path = path.resolve()
    try:
        private_dir(path.parent)  # mkstemp creates the file 0600
        fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ConfigError(
            f"cannot write {path}: {exc.strerror or exc} (the folder {path.parent} must be "
            "writable, since the file is replaced atomically). Nothing was changed; fix the "
            "permissions and run the command again"
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(
            f"cannot write {path}: {exc.strerror or exc}. Nothing was changed; check the disk "
            "and the permissions, then run the command again"
        ) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def set_config_value(
    path: Path,
    key: str,
    value: Any,
    *,
    validate: Any,
    unset: bool = False,
) -> LoadedConfig:
    """Set ``key`` in the file at ``path`` if the result validates; otherwise change nothing.

    ``validate`` receives the would-be :class:`LoadedConfig`, read without the environment's
    overrides (a value must be valid in the file by itself: ``HERMES_CORE_WEBHOOK_SECRET`` set
    today must not let a short ``webhook.secret`` in), and raises :class:`ConfigError` to
    refuse; only then is the file replaced (atomically). The read, the check and the write hold
    :func:`config_lock`, so an edit made meanwhile by another command is not lost.
    """
    with config_lock(path):
        try:
            old = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            old = ""
        new = edit_config_text(old, path, key, value, unset=unset)
        with file_values_only():  # the file's values are judged by themselves, not the environment's
            validate(parse_config_text(new, path))
        loaded = parse_config_text(new, path)
        write_config_text(path, new)
    return loaded


@dataclass
class ConfigReport:
    """What ``config validate`` finds in a config text: ``errors`` make it invalid;
    ``plugin_errors`` (plugins that failed to load or warned at activation) and ``warnings``
    (settings without effect as the config stands) do not."""

    errors: list[str] = field(default_factory=list)
    plugin_errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.errors


def check_config_file_text(text: str, path: Path) -> ConfigReport:
    """Every problem of ``text`` as the config at ``path``: the core sections', then (against the
    config with the bad core values left out) each plugin section's and each selection's, then
    what a session would hit building the selected plugins (in a scratch home).

    ``config validate`` checks the file with it, and ``setup`` the text it is about to write.
    """
    from .host import PluginHost

    report = ConfigReport()
    loaded, report.errors = check_config_text(text, path)
    if loaded is None:
        return report
    host = PluginHost.load(config=loaded)
    report.errors += [line for _key, msg in host.config_problems(loaded)
                      for line in msg.splitlines()]
    report.plugin_errors = [f"{r.name}: {r.error}" for r in host.records.values() if r.error]
    report.warnings = host.registries.unused_settings(loaded)
    if not report.errors:  # build what a session would, in a scratch home: every problem
        activation_errors, activation_warnings = host.dry_activation()
        report.errors += activation_errors
        report.plugin_errors += activation_warnings
    return report
