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

Every change, of one store or of both (rollback, forget), goes through
:meth:`MemoryStore.write_stores`; the medium supplies ``_session`` (lock and read) and
``_commit`` (record and write): the files here, a database transaction in :mod:`.pg_store`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hermes_core.atomic import LockUnavailable, atomic_write, locked
from hermes_core.private import private_dir

from . import intent
from .entries import canonical_text, dedupe, joined_size, parse_entries, usage_label
from .errors import InvalidRequest, MemoryRefused, StoreUnreadable, WriteFailed
from .history import FileHistory, History, Provenance, Version, now
from .ops import Applied, Operation, apply, in_batch, validate

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


Writer = Callable[[Path, bytes], None]


@dataclass(slots=True)
class Session:
    """The stores of one change, locked and read (the medium's transaction, if it has one)."""

    states: dict[str, FileState]
    con: Any = None


def file_bytes(entries: list[str]) -> bytes:
    """What a store holding ``entries`` is written as (empty: no bytes)."""
    text = canonical_text(entries)
    return (text + "\n").encode() if text else b""


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


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
            FileHistory(self.directory, limit=history_limit, locker=_locked)
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
                in_batch(exc, number, op, len(ops))
                raise

        def change(entries: list[str], _raw: bytes | None) -> tuple[list[str], list[Applied]]:
            return apply(entries, checked, limit=limit, target=target)

        action = ops[0].action if len(ops) == 1 else "batch"
        return self._transact(target, change, by=by, action=str(action))

    def overwrite(
        self, target: str, entries: list[str], *, expected: bytes | None,
        by: Provenance | None = None, action: str = "edit",
        changes: list[dict[str, object]] | None = None,
    ) -> WriteResult:
        """Replace every entry at once (``memory edit``), if the store still holds ``expected``.

        The caller validates ``entries``; ``expected`` is the file's bytes when editing began
        (``None``: the file did not exist), so a write that happened meanwhile is never clobbered.
        """
        target = check_target(target)

        def change(current: list[str], raw: bytes | None) -> tuple[list[str], list[Applied]]:
            if raw != expected:
                raise MemoryRefused(
                    f"{self.path(target)} changed while you were editing it; nothing was "
                    "saved. Run the command again to edit the new version.", target=target)
            return list(entries), []

        return self._transact(target, change, force_write=True, by=by, action=action,
                              changes=changes)

    def _transact(
        self,
        target: str,
        change: Callable[[list[str], bytes | None], tuple[list[str], list[Applied]]],
        *,
        force_write: bool = False,
        by: Provenance | None = None,
        action: str = "edit",
        changes: list[dict[str, object]] | None = None,
    ) -> WriteResult:
        """One store's change through :meth:`write_stores`, as a :class:`WriteResult`.
        ``force_write``: rewrite a hand-edited file even when its entries stay the same."""
        limit = self.limits[target]
        done: list[tuple[list[str], list[Applied], bool]] = []

        def compute(states: dict[str, FileState]) -> dict[str, bytes | None]:
            state = states[target]
            new, applied = change(state.entries, state.raw)
            written = new != state.entries or (force_write and state.edited)
            done.append((new if written else state.entries, applied, written))
            return {target: file_bytes(new)} if written else {}

        def listed(states: dict[str, FileState],
                   new: dict[str, bytes | None]) -> list[dict[str, Any]]:
            if changes is not None:
                return list(changes)
            return describe_changes(target, states[target].entries, done[0][0], done[0][1])

        backup: list[Path] = []
        self.write_stores(compute, by=by or Provenance(), action=action, changes=listed,
                          targets=(target,), backup=backup,
                          writer=lambda path, data: atomic_write(path, data))
        entries, applied, written = done[0]
        return WriteResult(target, applied, entries, limit, written=written,
                           backup=backup[0] if backup else None)

    def write_stores(
        self,
        compute: Callable[[dict[str, FileState]], dict[str, bytes | None]],
        *,
        by: Provenance,
        action: str,
        changes: Callable[[dict[str, FileState], dict[str, bytes | None]],
                          list[dict[str, Any]]],
        restores: int | None = None,
        after_write: Callable[[], None] | None = None,
        targets: tuple[str, ...] = TARGETS,
        backup: list[Path] | None = None,
        writer: Writer = atomic_write,
    ) -> Version | None:
        """The one way a change is made: lock ``targets`` (in that order) and read them,
        ``compute`` their new bytes (target -> bytes, ``None``: no file; only the stores that
        change), record the version and write them, all or nothing; ``after_write`` runs with
        every lock still held (``forget`` redacts the history there). Nothing to change
        records nothing. ``backup``: copy a hand-edited file before rewriting it (its path is
        appended); ``writer``: the durable replace the file medium uses."""
        with self._session(targets) as session:
            states = session.states
            new = {t: d for t, d in compute(states).items() if d != states[t].raw}
            history = self.history
            if not new:
                if after_write is not None:
                    with history.locked() if history is not None else contextlib.nullcontext():
                        after_write()
                return None
            listed = changes(states, new)
            stores = {t: {"before": _text(states[t].raw), "after": _text(d)}
                      for t, d in new.items()}

            def build(number: int) -> Version:
                return Version(number, now(), action, by.origin, listed, stores,
                               session_id=by.session_id, message_id=by.message_id,
                               restores=restores)

            return self._commit(session, new, build, after_write=after_write, backup=backup,
                                writer=writer)

    # ---------------------------------------------------------------- the medium: files

    @contextlib.contextmanager
    def _session(self, targets: tuple[str, ...]) -> Iterator[Session]:
        """Lock the files (in ``targets`` order), complete what a killed writer left, read."""
        try:
            private_dir(self.directory)
        except OSError as exc:
            raise WriteFailed(
                f"cannot create the memory directory {self.directory}: {exc.strerror or exc}",
                target=targets[0] if len(targets) == 1 else None,
            ) from None
        with contextlib.ExitStack() as stack:
            for target in targets:
                stack.enter_context(_locked(self.path(target)))
            states: dict[str, FileState] = {}
            for target in targets:
                path = self.path(target)
                self._sweep_orphans(path)
                if intent.pending(path):
                    intent.finish(path, self.history)
                states[target] = state = read_state(path)
                if state.problem is not None:
                    raise StoreUnreadable(
                        f"{state.problem}. It was left untouched and nothing was written. Fix "
                        f"it or move it aside (e.g. mv {path} {path}.corrupt), then retry.",
                        target=target,
                    )
            yield Session(states)

    def _commit(self, session: Session, new: dict[str, bytes | None],
                build: Callable[[int], Version], *, after_write: Callable[[], None] | None,
                backup: list[Path] | None, writer: Writer) -> Version | None:
        """Under the history's lock: each file's intent (:mod:`.intent`), the version, the
        files; a failure puts back what was written and takes the version back."""
        history = self.history
        with history.locked() if history is not None else contextlib.nullcontext():
            version, size = None, 0
            try:
                if history is not None or len(new) > 1:  # one file alone is replaced atomically
                    number = history.next_number() if history is not None else 0
                    for target, data in new.items():
                        intent.record(self.path(target), target, number,
                                      session.states[target].raw, data)
                if history is not None:
                    version, size = history.append(build)
            except OSError as exc:
                self._clear_intents(new)
                where = history.path if history is not None else self.directory
                raise WriteFailed(f"cannot record the change in {where}: {exc.strerror or exc}; "
                                  "nothing was changed") from None
            self._write_files(session.states, new, size, backup, writer)
            self._clear_intents(new)
            if after_write is not None:
                after_write()
            if history is not None:
                with contextlib.suppress(OSError):  # pruning is housekeeping; the write stands
                    history.prune()
        return version

    def _clear_intents(self, targets: Iterable[str]) -> None:
        for target in targets:
            intent.clear(self.path(target))

    def _write_files(self, states: dict[str, FileState], new: dict[str, bytes | None],
                     size: int, backup: list[Path] | None, writer: Writer) -> None:
        """Write (``None``: delete) each changed file; on a failure put back the files already
        written, take the version back and clear the intents."""
        written: list[str] = []
        failing, step = "", "write"
        try:
            for target, data in new.items():
                failing, path, old = target, self.path(target), states[target]
                if backup is not None and old.edited and old.raw is not None:
                    step = "back up the hand-edited memory file"
                    backup.append(_backup_path(path))
                    writer(backup[-1], old.raw)
                    step = "write"
                intent.replace_file(path, data, writer)
                written.append(target)
        except OSError as exc:
            for done in written:  # put back what was already replaced
                with contextlib.suppress(OSError):
                    intent.replace_file(self.path(done), states[done].raw, writer)
            if self.history is not None:
                self.history.undo(size)
            self._clear_intents(new)
            raise WriteFailed(
                f"cannot {step} {self.path(failing)}: {exc.strerror or exc}. Nothing was "
                "changed; check free disk space and permissions, then retry.",
                target=failing,
            ) from None

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
