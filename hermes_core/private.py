"""Private files: everything hermes-core creates in its home is readable by its owner only.

Memories, the session archive, the lossless store, skills and lock files hold what the user told
the agent, so they are created ``0600`` and their folders ``0700``, whatever the process umask. Every
creator goes through these helpers (plugins included: this is a public kernel module), so the rule
lives in one place:

* :func:`private_dir` creates a folder (and any missing parents) ``0700``; folders that already
  existed are left as they are (the home may sit inside a folder the user chose).
* :func:`private_file` creates an empty file ``0600`` if it is missing, and takes group and other
  permissions away from one that exists (files left ``0644`` by older versions are tightened); a
  folder at the path is refused (``IsADirectoryError``), its permissions left as they are.
* :func:`private_sqlite` prepares a SQLite database before it is opened: the folder, the file
  ``0600`` (SQLite creates ``-wal``, ``-shm`` and ``-journal`` with the database's permissions),
  and tightens such side files that already exist.
* :func:`write_private_text` writes a whole file ``0600``.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "private_dir",
    "private_file",
    "private_sqlite",
    "write_private_text",
]

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents with mode 0700; return ``path``."""
    path = Path(path)
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile by another process: theirs, leave it
        os.chmod(folder, PRIVATE_DIR_MODE)  # exact, whatever the umask
    if not path.is_dir():
        raise NotADirectoryError(f"{path} exists and is not a folder")
    return path


def _tighten(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o077:
            with contextlib.suppress(PermissionError):  # not ours to change: leave it
                os.chmod(path, mode & 0o700)


def private_file(path: Path) -> Path:
    """Make sure ``path`` exists and only its owner can read or write it; return ``path``."""
    path = Path(path)
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        if path.is_dir():  # never loosen or tighten a folder the caller took for a file
            raise IsADirectoryError(f"{path} is a folder, not a file: name a file there") from None
        _tighten(path)
    else:
        os.close(fd)
        os.chmod(path, PRIVATE_FILE_MODE)
    return path


def private_sqlite(path: Path) -> Path:
    """Prepare the SQLite database ``path`` so that it and its side files are private."""
    path = Path(path)
    private_file(path)
    for suffix in _SQLITE_SIDE_FILES:
        _tighten(path.with_name(path.name + suffix))
    return path


def write_private_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, created 0600 (an existing file is tightened)."""
    private_file(path)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
