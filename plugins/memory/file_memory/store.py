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
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .entries import canonical_text, dedupe, joined_size, parse_entries, usage_label
from .errors import InvalidRequest, MemoryRefused, StoreUnreadable, WriteFailed
from .ops import Applied, Operation, apply, validate

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FILENAMES",
    "TARGETS",
    "FileState",
    "MemoryStore",
    "WriteResult",
    "check_target",
]

TARGETS: tuple[str, ...] = ("memory", "user")
FILENAMES: dict[str, str] = {"memory": "MEMORY.md", "user": "USER.md"}

# One lock per file path for the whole process: two MemoryStore objects (the provider and a CLI
# command run in-process, two hosts in one test) must serialise too.
_REGISTRY_LOCK = threading.Lock()
_THREAD_LOCKS: dict[str, threading.Lock] = {}


def _thread_lock(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _REGISTRY_LOCK:
        lock = _THREAD_LOCKS.get(key)
        if lock is None:
            lock = _THREAD_LOCKS[key] = threading.Lock()
        return lock


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


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """The in-process lock of ``path``, then an exclusive OS lock on ``<path>.lock``."""
    with _thread_lock(path):
        if fcntl is None:  # pragma: no cover - no cross-process lock on this platform
            yield
            return
        try:
            fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise WriteFailed(
                f"cannot open the lock file {path}.lock: {exc.strerror or exc}; check that "
                f"{path.parent} is writable"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks; the kernel drops it if the holder dies
            yield
        finally:
            os.close(fd)  # closing releases the flock


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable. Not every platform can open a directory.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` by ``data`` atomically and durably; raise ``OSError`` on failure."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


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

    def __init__(self, directory: Path, *, memory_limit: int = 2200, user_limit: int = 1375):
        self.directory = Path(directory)
        self.limits = {"memory": memory_limit, "user": user_limit}
        self._swept: set[str] = set()

    # ------------------------------------------------------------------------------- reading

    def path(self, target: str) -> Path:
        return self.directory / FILENAMES[check_target(target)]

    def limit(self, target: str) -> int:
        return self.limits[check_target(target)]

    def read(self, target: str) -> FileState:
        """The file as it is now (no lock): entries with duplicates, and any problem."""
        return read_state(self.path(target))

    def entries(self, target: str) -> list[str]:
        """The live entries, duplicates dropped (the first copy keeps its place)."""
        return dedupe(self.read(target).entries)

    # ------------------------------------------------------------------------------ mutating

    def add(self, target: str, content: str) -> WriteResult:
        return self.apply(target, [Operation("add", content=content)])

    def replace(self, target: str, old_text: str, content: str) -> WriteResult:
        return self.apply(target, [Operation("replace", content=content, old_text=old_text)])

    def remove(self, target: str, old_text: str) -> WriteResult:
        return self.apply(target, [Operation("remove", old_text=old_text)])

    def apply(self, target: str, ops: Sequence[Operation]) -> WriteResult:
        """Apply ``ops`` all-or-nothing; raise a :class:`MemoryRefused` subclass when refused."""
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

        return self._transact(target, change)

    def overwrite(
        self, target: str, entries: list[str], *, expected: bytes | None
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

        return self._transact(target, change, force_write=True)

    def _transact(
        self,
        target: str,
        change: Callable[[list[str]], tuple[list[str], list[Applied]]],
        *,
        force_write: bool = False,
    ) -> WriteResult:
        path = self.path(target)
        limit = self.limits[target]
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteFailed(
                f"cannot create the memory directory {self.directory}: {exc.strerror or exc}",
                target=target,
            ) from None
        with _locked(path):
            self._sweep_orphans(path)
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
            try:
                if state.edited and state.raw is not None:
                    step = "back up the hand-edited"
                    backup = _backup_path(path)
                    atomic_write(backup, state.raw)
                    step = "write the"
                text = canonical_text(new)
                atomic_write(path, (text + "\n").encode() if text else b"")
            except OSError as exc:
                raise WriteFailed(
                    f"Failed to {step} memory file {path}: {exc.strerror or exc}. The file was "
                    "not changed; check free disk space and permissions, then retry.",
                    target=target,
                ) from None
        return WriteResult(target, applied, new, limit, written=True, backup=backup)

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
