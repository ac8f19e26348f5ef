"""Locked, atomic file writes for plugins that keep their state in plain files.

Two pieces, used together for a read-modify-write that neither loses a concurrent change nor
leaves a half-written file behind:

* :func:`locked` serialises writers of one path: first an in-process lock (one per absolute path
  for the whole process, so two objects over the same file in one process wait for each other),
  then an exclusive ``flock`` on a sibling ``<path>.lock`` file (a separate file, because the data
  file itself is replaced on every write and a lock on a replaced inode protects nothing). The OS
  drops the ``flock`` if its holder dies.
* :func:`atomic_write` writes the new bytes to a temporary file in the same directory, ``fsync``\\ s
  it, renames it over the old file and ``fsync``\\ s the directory: after a crash at any instant the
  path holds the old or the new content, never a mix. Readers therefore need no lock.

:func:`fsync_dir` makes a rename done by other means (a folder moved with ``os.rename``) durable.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LockUnavailable", "atomic_write", "fsync_dir", "locked"]

_REGISTRY_LOCK = threading.Lock()
_THREAD_LOCKS: dict[str, threading.Lock] = {}


class LockUnavailable(OSError):
    """The lock file of a path cannot be opened (usually: its directory is not writable)."""


def _thread_lock(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _REGISTRY_LOCK:
        lock = _THREAD_LOCKS.get(key)
        if lock is None:
            lock = _THREAD_LOCKS[key] = threading.Lock()
        return lock


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the in-process lock of ``path``, then an exclusive OS lock on ``<path>.lock``.

    Raises :class:`LockUnavailable` (an ``OSError``) naming the lock file when it cannot be opened.
    """
    with _thread_lock(path):
        if fcntl is None:  # pragma: no cover - no cross-process lock on this platform
            yield
            return
        try:
            fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise LockUnavailable(
                exc.errno,
                f"cannot open the lock file {path}.lock: {exc.strerror or exc}; check that "
                f"{path.parent} is writable",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks; the kernel drops it if the holder dies
            yield
        finally:
            os.close(fd)  # closing releases the flock


def fsync_dir(directory: Path) -> None:
    """``fsync`` the folder ``directory``, so a rename in it survives a crash (a platform that
    cannot open a folder, or refuses to sync one, is left as it is)."""
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
    import tempfile  # with shutil, bz2 and lzma: paid by the first write, not by an import

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
    fsync_dir(path.parent)
