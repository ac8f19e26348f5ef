"""MEMORY.md and USER.md on disk: locked read-modify-write, atomic replacement, edit detection.

Every mutation runs the same steps:

1. validate the request and scan new content for threats (no I/O, no lock);
2. take the in-process lock of the file, then an exclusive ``flock`` on a sibling ``.lock`` file
   (a separate file, because the data file itself is replaced by rename on every write and a lock
   on a replaced inode protects nothing);
3. re-read the file under the lock: what another thread or process wrote a moment ago is the base
   of this change, so no concurrent write is ever lost;
4. apply the operations to a copy and check the budget on the result;
5. if the file on disk is not in the form this store writes (someone edited it by hand), copy its
   exact bytes to a ``.bak`` file first, so rewriting it can never silently drop text;
6. write the new text to a temporary file in the same directory, ``fsync`` it, ``os.replace`` it
   over the old file and ``fsync`` the directory: a crash at any instant leaves the old or the new
   file, never a mix.

Reads take no lock: thanks to step 6 a reader always sees a whole file.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hermes_core.atomic import LockUnavailable, atomic_write, locked
from hermes_core.private import private_dir

from . import intent
from .entries import canonical_text, dedupe, joined_size, parse_entries, usage_label
from .errors import InvalidRequest, MemoryRefused, StoreUnreadable, WriteFailed
from .history import History, Provenance, Version, now
from .ops import Applied, Operation, apply, validate

__all__ = [
    "FILENAMES",
    "TARGETS",
    "FileState",
    "MemoryStore",
    "WriteResult",
    "check_target",
    "describe_changes",
]

TARGETS: tuple[str, ...] = ("memory", "user")
FILENAMES: dict[str, str] = {"memory": "MEMORY.md", "user": "USER.md"}

def check_target(target: object) -> str:
    """``target`` if it names a store; otherwise :class:`InvalidRequest` listing the choices."""
    if target not in TARGETS:
        raise InvalidRequest(
            f"Unknown target {target!r}. Use 'memory' (the agent's own notes) or 'user' "
            "(the user's profile)."
        )
    assert isinstance(target, str)
    return target


@dataclass(slots=True)
class FileState:
    """One read of a memory file."""

    #: entries in file order, duplicates kept (an empty list when missing or unreadable)
    entries: list[str]
    #: the exact bytes read (``None`` when the file does not exist)
    raw: bytes | None = None
    #: why the file could not be used, or ``None``
    problem: str | None = None
    #: the file is not in the form the store writes (hand-edited): back it up before rewriting
    edited: bool = False


@dataclass(slots=True)
class WriteResult:
    """What a successful mutation did."""

    target: str
    applied: list[Applied]
    #: the entries now on disk, duplicates kept
    entries: list[str]
    limit: int
    #: False when nothing needed writing (a duplicate add)
    written: bool
    #: where the hand-edited file was copied before it was rewritten
    backup: Path | None = None
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = joined_size(self.entries)

    @property
    def usage(self) -> str:
        return usage_label(self.size, self.limit)


def _decode(raw: bytes, path: Path) -> tuple[str | None, str | None]:
    """(text, None) or (None, problem) for the bytes of a memory file."""
    skip = 3 if raw.startswith(b"\xef\xbb\xbf") else 0  # tolerate the BOM some editors add
    try:
        text = raw[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + skip
        return None, (
            f"{path} is not UTF-8 text (invalid byte 0x{raw[offset]:02x} at offset {offset}); "
            "it looks corrupt or binary"
        )
    if "\x00" in text:
        return None, f"{path} contains NUL bytes; it looks corrupt or binary"
    return text, None


def read_state(path: Path) -> FileState:
    """Read and parse ``path``; problems are reported in the state, never raised."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return FileState([])
    except OSError as exc:
        return FileState([], problem=f"{path} cannot be read: {exc.strerror or exc}")
    text, problem = _decode(raw, path)
    if text is None:
        return FileState([], raw=raw, problem=problem)
    entries = parse_entries(text)
    # Compared before normalising line endings: a CRLF file is not in the form the store writes,
    # so it counts as hand-edited and its exact bytes are backed up before the first rewrite.
    return FileState(entries, raw=raw, edited=text.strip() != canonical_text(entries))


_held = threading.local()


def _holding(path: Path) -> bool:
    """Whether this thread holds the lock of ``path`` (taken through :func:`_locked`)."""
    return str(path) in getattr(_held, "paths", ())


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """:func:`hermes_core.atomic.locked`, its failure reported as :class:`WriteFailed`."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(locked(path))
        except LockUnavailable as exc:
            raise WriteFailed(str(exc.strerror)) from None
        paths: set[str] = getattr(_held, "paths", None) or set()
        _held.paths = paths
        paths.add(str(path))
        try:
            yield
        finally:
            paths.discard(str(path))


def finish_intents(store: MemoryStore, targets: Iterable[str]) -> None:
    """Complete what a writer killed mid-write left (see :mod:`.intent`), each file under its
    lock; a file this thread is writing is skipped."""
    for target in targets:
        path = store.path(target)
        if intent.pending(path) and not _holding(path):
            with contextlib.suppress(OSError, WriteFailed), _locked(path):
                intent.finish(path, store.history)


def _backup_path(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    n = 2
    while candidate.exists():
        candidate = path.with_name(f"{path.name}.{stamp}-{n}.bak")
        n += 1
    return candidate


class MemoryStore:
    """The two bounded stores of one memory directory (``$HERMES_CORE_HOME/memories``).

    Safe for any number of threads and processes sharing the directory. Holds no entries itself:
    every call reads the disk, so writes made elsewhere are always seen.
    """

    def __init__(self, directory: Path, *, memory_limit: int = 2200, user_limit: int = 1375,
                 history_limit: int = 200):
        self.directory = Path(directory)
        self.limits = {"memory": memory_limit, "user": user_limit}
        self._swept: set[str] = set()
        #: the version log (``None`` when ``history_limit`` is 0: no versions are kept)
        self.history: History | None = (
            History(self.directory, limit=history_limit, locker=_locked)
            if history_limit > 0 else None
        )
        finish_intents(self, TARGETS)

    # ------------------------------------------------------------------------------- reading

    def path(self, target: str) -> Path:
        return self.directory / FILENAMES[check_target(target)]

    def limit(self, target: str) -> int:
        return self.limits[check_target(target)]

    def read(self, target: str) -> FileState:
        """The file as it is now (no lock): entries with duplicates, and any problem. A write
        cut short by a dead writer is completed first (:mod:`.intent`)."""
        path = self.path(target)
        if intent.pending(path):
            finish_intents(self, [target])
        return read_state(path)

    def read_many(self, targets: Iterable[str]) -> dict[str, FileState]:
        """:meth:`read` of each target (a database store reads them in one query)."""
        return {t: self.read(t) for t in targets}

    def entries(self, target: str) -> list[str]:
        """The live entries, duplicates dropped (the first copy keeps its place)."""
        return dedupe(self.read(target).entries)

    # ------------------------------------------------------------------------------ mutating

    def add(self, target: str, content: str, *, by: Provenance | None = None) -> WriteResult:
        return self.apply(target, [Operation("add", content=content)], by=by)

    def replace(self, target: str, old_text: str, content: str, *,
                by: Provenance | None = None) -> WriteResult:
        return self.apply(target, [Operation("replace", content=content, old_text=old_text)],
                          by=by)

    def remove(self, target: str, old_text: str, *, by: Provenance | None = None) -> WriteResult:
        return self.apply(target, [Operation("remove", old_text=old_text)], by=by)

    def apply(self, target: str, ops: Sequence[Operation], *,
              by: Provenance | None = None) -> WriteResult:
        """Apply ``ops`` all-or-nothing; raise a :class:`MemoryRefused` subclass when refused.

        ``by`` says who asked (recorded in the version the change makes; default: the CLI).
        """
        target = check_target(target)
        limit = self.limits[target]
        if not ops:
            raise InvalidRequest(
                "The operations list is empty; give at least one add, replace or remove.",
                target=target,
            )
        checked = []
        for number, op in enumerate(ops, start=1):
            try:
                checked.append(validate(op, limit=limit, target=target))
            except MemoryRefused as exc:
                if len(ops) > 1:
                    exc.operation = number
                    exc.message = (
                        f"Operation {number} ({op.action}): {exc.message} No operation was "
                        "applied (a batch is all-or-nothing)."
                    )
                    exc.args = (exc.message,)
                raise

        def change(entries: list[str]) -> tuple[list[str], list[Applied]]:
            return apply(entries, checked, limit=limit, target=target)

        action = ops[0].action if len(ops) == 1 else "batch"
        return self._transact(target, change, by=by, action=str(action))

    def overwrite(
        self, target: str, entries: list[str], *, expected: bytes | None,
        by: Provenance | None = None, action: str = "edit",
        changes: list[dict[str, object]] | None = None,
    ) -> WriteResult:
        """Replace every entry at once (``memory edit``), if the file still holds ``expected``.

        The caller validates ``entries``; ``expected`` is the file's bytes when editing began
        (``None``: the file did not exist), so a write that happened meanwhile is never clobbered.
        """
        target = check_target(target)
        path = self.path(target)

        def change(current: list[str]) -> tuple[list[str], list[Applied]]:
            state = read_state(path)
            if state.raw != expected:
                raise MemoryRefused(
                    f"{path} changed while you were editing it; nothing was saved. Run the "
                    "command again to edit the new version.",
                    target=target,
                )
            return list(entries), []

        return self._transact(target, change, force_write=True, by=by, action=action,
                              changes=changes)

    def _transact(
        self,
        target: str,
        change: Callable[[list[str]], tuple[list[str], list[Applied]]],
        *,
        force_write: bool = False,
        by: Provenance | None = None,
        action: str = "edit",
        changes: list[dict[str, object]] | None = None,
    ) -> WriteResult:
        path = self.path(target)
        limit = self.limits[target]
        try:
            private_dir(self.directory)
        except OSError as exc:
            raise WriteFailed(
                f"cannot create the memory directory {self.directory}: {exc.strerror or exc}",
                target=target,
            ) from None
        with _locked(path):
            self._sweep_orphans(path)
            if intent.pending(path):
                intent.finish(path, self.history)
            state = read_state(path)
            if state.problem is not None:
                raise StoreUnreadable(
                    f"{state.problem}. It was left untouched and nothing was written. Fix it or "
                    f"move it aside (e.g. mv {path} {path}.corrupt), then retry.",
                    target=target,
                )
            new, applied = change(state.entries)
            if new == state.entries and not (force_write and state.edited):
                return WriteResult(target, applied, state.entries, limit, written=False)
            backup = None
            step = "write the"
            text = canonical_text(new)
            data = (text + "\n").encode() if text else b""
            with self._versioned(path, target, state, new, data, applied, by, action,
                                 changes) as undo:
                try:
                    if state.edited and state.raw is not None:
                        step = "back up the hand-edited"
                        backup = _backup_path(path)
                        atomic_write(backup, state.raw)
                        step = "write the"
                    atomic_write(path, data)
                except OSError as exc:
                    undo()
                    raise WriteFailed(
                        f"Failed to {step} memory file {path}: {exc.strerror or exc}. The file "
                        "was not changed; check free disk space and permissions, then retry.",
                        target=target,
                    ) from None
        return WriteResult(target, applied, new, limit, written=True, backup=backup)

    @contextlib.contextmanager
    def _versioned(
        self, path: Path, target: str, state: FileState, new: list[str], data: bytes,
        applied: list[Applied], by: Provenance | None, action: str,
        changes: list[dict[str, object]] | None,
    ) -> Iterator[Callable[[], None]]:
        """Record the write about to happen as a version; yield an undo for a failed write.

        Runs under the store's lock; takes the history's own lock after it (fixed order). The
        version is appended before the file is replaced: if the replace fails the append is cut
        off again, so the history never shows a change that did not happen. The write's intent
        is left first and dropped once the file is written, so a writer killed in between has
        its change completed by the next one (:mod:`.intent`).
        """
        history = self.history
        if history is None:
            yield lambda: None
            return
        who = by or Provenance()
        if changes is None:
            changes = describe_changes(target, state.entries, new, applied)
        before = state.raw.decode("utf-8") if state.raw is not None else None
        stores: dict[str, dict[str, str | None]] = {
            target: {"before": before, "after": data.decode("utf-8")}
        }

        def build(number: int) -> Version:
            return Version(number, now(), action, who.origin, list(changes or []), stores,
                           session_id=who.session_id, message_id=who.message_id)

        with history.locked():
            try:
                intent.record(path, target, history._tail()[0] + 1, state.raw, data)
                _version, size = history.append(build)
            except OSError as exc:
                intent.clear(path)
                raise WriteFailed(
                    f"cannot record the change in {history.path}: {exc.strerror or exc}. The "
                    "memory file was not changed; check free disk space and permissions.",
                    target=target,
                ) from None
            undone = False

            def undo() -> None:
                nonlocal undone
                undone = True
                history.undo(size)
                intent.clear(path)

            yield undo
            intent.clear(path)
            if not undone:
                with contextlib.suppress(OSError):  # pruning is housekeeping; the write stands
                    history.prune()

    def _sweep_orphans(self, path: Path) -> None:
        """Delete temporary files left by a writer that was killed mid-write.

        Called under the lock: temporary files are only created while it is held, so any that
        exist now belong to a writer that died. Done once per store and file.
        """
        if path.name in self._swept:
            return
        self._swept.add(path.name)
        prefix = f".{path.name}."
        with contextlib.suppress(OSError):
            for item in os.scandir(path.parent):
                if item.name.startswith(prefix) and item.name.endswith(".tmp"):
                    with contextlib.suppress(OSError):
                        os.unlink(item.path)


def describe_changes(
    target: str, before: list[str], after: list[str], applied: Sequence[Applied] = ()
) -> list[dict[str, object]]:
    """The ``changes`` of a version: one item per entry added, replaced or removed."""
    real = [a for a in applied if not a.duplicate]
    if real:
        listed: list[dict[str, object]] = [
            {"target": target, "action": a.action, "old": a.old_text, "new": a.content or None}
            for a in real]
        return listed
    gone = [e for e in before if e not in after]
    added = [e for e in after if e not in before]
    out: list[dict[str, object]] = []
    out += [{"target": target, "action": "remove", "old": e, "new": None} for e in gone]
    out += [{"target": target, "action": "add", "old": None, "new": e} for e in added]
    return out
