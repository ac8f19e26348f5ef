"""A memory file write's intent, so a writer killed mid-write leaves no half-applied change.

A change of MEMORY.md / USER.md is recorded as a version of the history *before* the files are
replaced. A writer killed between the two (``kill -9``, a crash) would leave a version that
describes a write that never happened, and a rollback or forget that changes both files would be
half-applied: one file restored, the other not. So, with the store's lock (and the history's)
held, the writer first leaves ``.MEMORY.md.intent`` next to each file it is about to replace: the
number its version will get, the file's bytes before and after. Once every file is written the
intents are deleted.

Whoever next takes the file's lock (a write, a rollback, a read that finds an intent, opening
the store) calls :func:`finish`: when the intent's version is in the history (the change was
committed to the log), a file still holding its ``before`` bytes gets the ``after`` bytes;
when it is not (the writer died before appending it), nothing was changed and the intent is
dropped. A file that holds neither (edited by hand since) is left alone. Without a history
(``history_limit: 0``) the intent itself is the commit record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core.atomic import atomic_write

if TYPE_CHECKING:
    from .history import History

__all__ = ["clear", "finish", "intent_path", "pending", "record", "replace_file"]

log = logging.getLogger("hermes_core.plugins.file_memory")


def intent_path(path: Path) -> Path:
    """Where the intent of a write to ``path`` is kept (a hidden file next to it)."""
    return path.with_name(f".{path.name}.intent")


def pending(path: Path) -> bool:
    """Whether a write to ``path`` is under way or was cut short (one ``stat``)."""
    return os.path.lexists(intent_path(path))


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "surrogateescape")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def record(path: Path, target: str, version: int, before: bytes | None,
           after: bytes | None) -> None:
    """Leave the intent of replacing ``path``'s ``before`` bytes by ``after`` (``None``: no
    file) as ``version`` of the history. Call with the file's lock held, before the version is
    appended; raises ``OSError`` when it cannot be written (nothing was changed)."""
    body = json.dumps({"target": target, "version": version, "before": _text(before),
                       "after": _text(after)}, ensure_ascii=False).encode("utf-8")
    fd = os.open(intent_path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, body)
    finally:
        os.close(fd)


def replace_file(path: Path, data: bytes | None, writer: Callable[[Path, bytes], None]) -> None:
    """Make ``path`` hold ``data`` through ``writer`` (``None``: no file)."""
    if data is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    else:
        writer(path, data)


def clear(path: Path) -> None:
    """The write to ``path`` is complete (or undone): drop its intent."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(intent_path(path))


def finish(path: Path, history: History | None) -> bool:
    """Complete or drop the intent a dead writer left for ``path`` (with its lock held).

    Returns True when ``path`` was rewritten to the state its history records.
    """
    where = intent_path(path)
    try:
        raw = where.read_bytes()
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("cannot read %s (%s); left as it is", where, exc.strerror or exc)
        return False
    try:
        data: dict[str, Any] = json.loads(raw)
        target, number = str(data["target"]), int(data["version"])
        before, after = _bytes(data["before"]), _bytes(data["after"])
    except (ValueError, KeyError, TypeError):
        clear(path)  # torn while it was being written: the version was not appended yet
        return False
    if history is not None and not any(
            v.version == number and target in v.stores for v in history.read()):
        clear(path)  # the writer died before its version was recorded: nothing changed
        return False
    try:
        current: bytes | None = path.read_bytes()
    except FileNotFoundError:
        current = None
    done = False
    if current != after and (current == before or (current == b"" and before is None)):
        replace_file(path, after, atomic_write)
        log.warning("%s: completed the change recorded as version %d (its writer stopped "
                    "before writing the file)", path, number)
        done = True
    elif current != after:
        log.warning("%s: left as it is; it was changed after version %d was recorded", path,
                    number)
    clear(path)
    return done
