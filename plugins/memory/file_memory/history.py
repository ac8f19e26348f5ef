"""Versions of MEMORY.md and USER.md: who changed what, when, and the stores' text after it.

Every change the store makes is one *version*, appended as one JSON line to
``memories/history.jsonl`` while the store's lock is held (the history has a lock of its own,
always taken after the stores' locks, so the order is fixed and nothing deadlocks). A version
records:

* ``version`` (a number that only grows), ``time`` (Unix seconds);
* ``action``: ``add``, ``replace``, ``remove``, ``batch``, ``edit``, ``curate``, ``rollback``,
  ``forget``;
* ``origin``: ``assistant_tool``, ``memory_review``, ``memory_flush``, ``cli``, ``curator``;
* ``session_id`` and ``message_id`` (the id of the tool call in the assistant message that made
  the write) when the write came from a conversation;
* ``changes``: one item per entry touched, with its old and new text;
* ``stores``: for each store touched, its exact text after the change and, when it differs from
  the previous version's ``after`` of that store (the first version, or a hand edit in between),
  before it (``null`` when the file did not exist). :meth:`History.state_at` rebuilds both stores
  at any version from these.

The file is bounded: past ``limit`` versions (plus half as many again of slack, at least 10, so
the rewrite is rare) the oldest are dropped in one atomic rewrite. A torn last line (a crash
mid-append) is skipped on read. Nothing here ever reaches the system prompt: only the store files
do.

:meth:`History.redact` is what ``forget`` uses: it removes every entry matching the subject from
every stored version, so a forgotten fact cannot come back through the history or a rollback.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .entries import canonical_text, parse_entries, squash

__all__ = [
    "HISTORY_FILE",
    "ORIGINS",
    "FileHistory",
    "History",
    "Provenance",
    "UnknownVersion",
    "Version",
    "matches_subject",
]

HISTORY_FILE = "history.jsonl"
ORIGINS: tuple[str, ...] = ("assistant_tool", "memory_review", "memory_flush", "cli", "curator")
#: what a forgotten entry's text is replaced by in a version's ``changes``
FORGOTTEN = "[forgotten]"


class UnknownVersion(LookupError):
    """A version number the history does not hold (never existed, or pruned)."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who asked for a change: recorded with the version it makes."""

    origin: str = "cli"
    session_id: str | None = None
    #: the id of the tool call (in the assistant message) that made the write
    message_id: str | None = None


@dataclass(slots=True)
class Version:
    """One recorded change (see the module docstring for the fields)."""

    version: int
    time: float
    action: str
    origin: str
    changes: list[dict[str, Any]]
    #: target -> {"before": str | None, "after": str | None}
    stores: dict[str, dict[str, str | None]]
    session_id: str | None = None
    message_id: str | None = None
    #: for a rollback, the version it restored
    restores: int | None = None
    #: entries were removed from this version by a later ``forget``
    redacted: bool = False
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def targets(self) -> list[str]:
        return sorted(self.stores)

    def to_dict(self, *, stores: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version, "time": self.time, "action": self.action,
            "origin": self.origin, "session_id": self.session_id,
            "message_id": self.message_id, "targets": self.targets, "changes": self.changes,
        }
        if self.restores is not None:
            out["restores"] = self.restores
        if self.redacted:
            out["redacted"] = True
        if self.note:
            out["note"] = self.note
        if stores:
            out["stores"] = self.stores
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Version:
        return cls(
            version=int(data["version"]), time=float(data["time"]), action=str(data["action"]),
            origin=str(data["origin"]), changes=list(data.get("changes") or []),
            stores=dict(data.get("stores") or {}), session_id=data.get("session_id"),
            message_id=data.get("message_id"), restores=data.get("restores"),
            redacted=bool(data.get("redacted")), note=data.get("note"),
        )


def matches_subject(entry: str, subject: str) -> bool:
    """Whether ``entry`` mentions ``subject`` (case and runs of whitespace ignored)."""
    needle = squash(subject)
    return bool(needle) and needle in squash(entry)


class History:
    """The version log's rules, written once: numbering, the ``before`` a version leaves out,
    pruning, ``state_at``, ``get``, ``redact`` and import. Where the versions live is the
    medium's part: :class:`FileHistory` (``history.jsonl``) or
    :class:`.pg_store.PgHistory` (rows of ``memory_versions``)."""

    #: how many versions are kept (see :meth:`prune`)
    limit: int
    #: where the log is, for messages (a path, or the redacted URL and the owner)
    path: Any

    # --------------------------------------------------------------------- the medium's part

    def read(self) -> list[Version]:
        """Every retained version, oldest first (an unreadable one is skipped)."""
        raise NotImplementedError

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold the log's lock (writers serialise on it)."""
        raise NotImplementedError

    def _held(self) -> contextlib.AbstractContextManager[None]:
        """What :meth:`prune` and :meth:`redact` hold: nothing more for the file (its caller
        holds :meth:`locked`), the owner's head row for the database."""
        return contextlib.nullcontext()

    def _tail(self) -> tuple[int, int]:
        """(last version, how many are kept)."""
        raise NotImplementedError

    def _head(self) -> tuple[int, int, dict[str, str | None]]:
        """With the lock held: (last version, how many, the newest ``after`` of each store)."""
        raise NotImplementedError

    def _insert(self, version: Version, count: int, last_after: dict[str, str | None]) -> int:
        """Store ``version`` after ``count`` others; what :meth:`undo` needs to take it back."""
        raise NotImplementedError

    def _rewrite(self, versions: list[Version]) -> None:
        """Make the log exactly ``versions`` (with the lock held)."""
        raise NotImplementedError

    def undo(self, size: int) -> None:
        """Take back the version :meth:`append` returned ``size`` with (with the lock held)."""

    # -------------------------------------------------------------------------------- reading

    def newest(self) -> int:
        """The newest version's number (0: none)."""
        return self._tail()[0]

    def next_number(self) -> int:
        """The number the next version gets (with the lock held)."""
        return self._tail()[0] + 1

    def get(self, number: int) -> Version:
        """The version ``number``; :class:`UnknownVersion` explains why when it is not held."""
        versions = self.read()
        for item in versions:
            if item.version == number:
                return item
        raise UnknownVersion(self._unknown_message(number, versions))

    def _unknown_message(self, number: int, versions: list[Version]) -> str:
        if not versions:
            return (f"there is no version {number}: the memory history is empty (no change has "
                    "been recorded yet)")
        first, last = versions[0].version, versions[-1].version
        if 0 < number < first:
            return (f"version {number} was pruned: the history keeps the last {self.limit} "
                    f"versions (file_memory.history_limit) and now holds {first}..{last}; "
                    "pick one of those")
        return (f"there is no version {number}: the history holds versions {first}..{last}; "
                "'hermes-core memory history' lists them")

    def state_at(self, number: int, targets: tuple[str, ...]) -> dict[str, str | None]:
        """The text of each store right after version ``number`` (``None``: no file).

        A store that no retained version touched is left out (its file has not changed since).
        """
        versions = self.read()
        if not any(v.version == number for v in versions):
            raise UnknownVersion(self._unknown_message(number, versions))
        out: dict[str, str | None] = {}
        for target in targets:
            upto = [v for v in versions if v.version <= number and target in v.stores]
            if upto:
                out[target] = upto[-1].stores[target].get("after")
                continue
            later = [v for v in versions if v.version > number and target in v.stores]
            if later and "before" in later[0].stores[target]:
                out[target] = later[0].stores[target]["before"]
        return out

    # -------------------------------------------------------------------------------- writing

    def append(self, build: Callable[[int], Version]) -> tuple[Version, int]:
        """Append the version ``build(next_number)``; return it and what :meth:`undo` takes.

        Call with :meth:`locked` held. A store's ``before`` equal to the previous version's
        ``after`` is left out (:meth:`state_at` finds it there), which halves most versions.
        """
        last, count, last_after = self._head()
        version = build(last + 1)
        for target, store in version.stores.items():
            if ("before" in store and target in last_after
                    and store["before"] == last_after[target]):
                del store["before"]
            last_after[target] = store.get("after")
        return version, self._insert(version, count, last_after)

    def prune(self) -> int:
        """Drop the oldest versions past the limit (with :meth:`locked` held); return how many.

        Runs only once the log holds half as many again as the limit (at least 10 more), so
        the rewrite is rare. The first kept version of each store gets its ``before`` back,
        taken from the dropped version it referred to.
        """
        with self._held():
            _last, count = self._tail()
            if count <= self.limit + max(10, self.limit // 2):
                return 0
            versions = self.read()
            dropped, keep = versions[:-self.limit], versions[-self.limit:]
            last_after = newest_after(dropped)
            seen: set[str] = set()
            for item in keep:
                for target, store in item.stores.items():
                    if target not in seen and "before" not in store and target in last_after:
                        store["before"] = last_after[target]
                    seen.add(target)
            self._rewrite(keep)
            return len(dropped)

    def redact(self, subject: str) -> int:
        """Remove every entry mentioning ``subject`` from every version; return versions changed.

        Call with :meth:`locked` held. The store texts lose the matching entries; a change whose
        old or new text (or reason) matched keeps its place with that text replaced by
        ``[forgotten]``.
        """
        with self._held():
            versions = self.read()
            changed = sum(_redact(item, subject) for item in versions)
            if changed:
                self._rewrite(versions)
            return changed

    def import_versions(self, versions: list[Version]) -> int:
        """Copy ``versions`` in (``storage migrate``) when the log is empty; how many."""
        if not versions:
            return 0
        with self.locked():
            if self._tail()[1]:
                return 0
            self._rewrite(versions)
        return len(versions)


def newest_after(versions: list[Version]) -> dict[str, str | None]:
    """The newest ``after`` of each store in ``versions``."""
    out: dict[str, str | None] = {}
    for item in versions:
        for target, store in item.stores.items():
            out[target] = store.get("after")
    return out


def _redact(item: Version, subject: str) -> bool:
    """Drop the entries mentioning ``subject`` from one version; whether it changed."""
    touched = False
    for store in item.stores.values():
        for key in ("before", "after"):
            text = store.get(key)
            if text is None:
                continue
            entries = parse_entries(text)
            kept = [e for e in entries if not matches_subject(e, subject)]
            if len(kept) != len(entries):
                body = canonical_text(kept)
                store[key] = body + "\n" if body else ""
                touched = True
    for change in item.changes:
        for key in ("old", "new", "reason"):  # the reason: a model's words about the entries
            value = change.get(key)
            if isinstance(value, str) and matches_subject(value, subject):
                change[key] = FORGOTTEN
                touched = True
    if touched:
        item.redacted = True
    return touched


def parse_versions(texts: Iterable[str | bytes]) -> list[Version]:
    """The versions stored as JSON ``texts``, in order; a torn or foreign one is skipped."""
    out = []
    for text in texts:
        try:
            out.append(Version.from_dict(json.loads(text)))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def dump(version: Version) -> str:
    """One version as the log stores it (JSON escapes NUL, so it fits a text column too)."""
    return json.dumps(version.to_dict(), ensure_ascii=False, separators=(",", ":"))


class FileHistory(History):
    """The version log of one memory directory: ``history.jsonl``, one version a line."""

    def __init__(self, directory: Path, *, limit: int = 200,
                 locker: Callable[[Path], contextlib.AbstractContextManager[None]]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / HISTORY_FILE
        self.limit = max(1, int(limit))
        self._locked = locker
        #: (st_ino, st_size, st_mtime_ns) -> (last version, line count): skips re-reading the
        #: file when no other process appended since this object last did
        self._cache: tuple[tuple[int, int, int], int, int] | None = None
        #: the newest ``after`` of each store (valid while ``_cache`` is)
        self._last_after: dict[str, str | None] = {}
        #: (stat key, newest version) for :meth:`newest`, apart from the writers' cache
        self._newest: tuple[tuple[int, int, int], int] | None = None

    def read(self) -> list[Version]:
        """Every retained version, oldest first (a torn or foreign line is skipped)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return parse_versions(line for line in raw.splitlines() if line.strip())

    def _stat(self) -> tuple[int, int, int] | None:
        """What tells whether the file changed: (st_ino, st_size, st_mtime_ns); None: no file."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def newest(self) -> int:
        """The newest version's number (0: none); reads the file only when it changed."""
        key = self._stat()
        if key is None:
            return 0
        cached = self._newest
        if cached is not None and cached[0] == key:
            return cached[1]
        versions = self.read()
        number = versions[-1].version if versions else 0
        self._newest = (key, number)
        return number

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with self._locked(self.path):
            yield

    def _tail(self) -> tuple[int, int]:
        """(last version, line count); reads the file only when it changed behind our back."""
        key = self._stat()
        if key is None:
            return 0, 0
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        versions = self.read()
        last = versions[-1].version if versions else 0
        self._cache = (key, last, len(versions))
        self._last_after = newest_after(versions)
        return last, len(versions)

    def _head(self) -> tuple[int, int, dict[str, str | None]]:
        last, count = self._tail()
        return last, count, dict(self._last_after)

    def _insert(self, version: Version, count: int, last_after: dict[str, str | None]) -> int:
        """Append one line (after a fresh newline when a crash tore the last one); the
        file's previous size, which :meth:`undo` cuts it back to."""
        line = (dump(version) + "\n").encode("utf-8")
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            os.write(fd, line)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        self._cache = ((st.st_ino, st.st_size, st.st_mtime_ns), version.version, count + 1)
        self._last_after = last_after
        return size

    def undo(self, size: int) -> None:
        """Cut the file back to ``size`` bytes (with :meth:`locked` held)."""
        self._last_after = {}
        with contextlib.suppress(OSError):
            if size == 0:
                os.unlink(self.path)  # the append created the file: leave no trace
            else:
                os.truncate(self.path, size)
        self._cache = None

    def _rewrite(self, versions: list[Version]) -> None:
        from hermes_core.atomic import atomic_write  # the kernel's durable replace

        atomic_write(self.path, b"".join((dump(v) + "\n").encode() for v in versions))
        self._cache = None


def now() -> float:
    return round(time.time(), 3)
