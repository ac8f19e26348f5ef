"""The spool: messages the archive could not store, kept on disk until it can.

When an append fails (disk full, a damaged page, a lock held too long), the message is appended
to ``<state.db>.spool.jsonl`` — one JSON object per line, written with ``O_APPEND`` under an
exclusive ``flock`` and ``fsync``ed before the caller hears about the failure — and the caller gets
an :class:`~.errors.ArchiveWriteError` saying where the message waits.

The next successful open, and every later append, first replays the spool into the archive in
file order, in ONE transaction that also records each entry's id in the ``meta`` table. The spool
is emptied only after that commit. A crash between the commit and the emptying leaves entries
that are already stored: their ids are in ``meta``, so the next replay skips them. Nothing is
stored twice and nothing is lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes_core.types import Session

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Spool", "SpoolEntry"]

_META_PREFIX = "spooled:"
_COUNTER = iter(range(1 << 62))
_COUNTER_LOCK = threading.Lock()


@dataclass(slots=True)
class SpoolEntry:
    """One message waiting to be stored."""

    id: str
    session: dict[str, Any]
    row: list[Any]

    def to_line(self) -> bytes:
        data = {"v": 1, "id": self.id, "session": self.session, "row": self.row}
        return (json.dumps(data, ensure_ascii=False) + "\n").encode("utf-8")


def session_fields(session: Session | str) -> dict[str, Any]:
    """What replay needs to create the session if the archive never saw it."""
    if isinstance(session, str):
        return {"id": session}
    return {
        "id": session.id, "platform": session.platform, "model": session.model,
        "title": session.title, "parent_session_id": session.parent_session_id,
        "started_at": session.started_at, "attributes": dict(session.attributes or {}),
    }


def session_from_fields(fields: dict[str, Any]) -> Session | str:
    if set(fields) == {"id"}:
        return str(fields["id"])
    return Session(
        id=str(fields["id"]), platform=fields.get("platform") or "cli",
        model=fields.get("model"), title=fields.get("title"),
        parent_session_id=fields.get("parent_session_id"),
        started_at=float(fields.get("started_at") or time.time()),
        attributes=dict(fields.get("attributes") or {}),
    )


def _new_id() -> str:
    with _COUNTER_LOCK:
        n = next(_COUNTER)
    return f"{time.time_ns():x}-{os.getpid()}-{n}-{uuid.uuid4().hex[:8]}"


class Spool:
    """The append-only side file of one archive."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def pending(self) -> bool:
        """Cheap check (one ``stat``): does the spool hold anything?"""
        try:
            return self.path.stat().st_size > 0
        except OSError:
            return False

    @contextlib.contextmanager
    def _locked(self, flags: int) -> Iterator[int]:
        fd = os.open(self.path, flags, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # releases the flock

    def add(self, session: Session | str, row: tuple[Any, ...]) -> SpoolEntry:
        """Append one message durably; raise ``OSError`` if even that fails."""
        entry = SpoolEntry(_new_id(), session_fields(session), list(row))
        line = entry.to_line()
        with self._locked(os.O_WRONLY | os.O_APPEND | os.O_CREAT) as fd:
            written = os.write(fd, line)
            if written != len(line):  # a short write on a full disk: undo the torn line
                os.ftruncate(fd, os.fstat(fd).st_size - written)
                raise OSError(28, "short write to the spool (disk full?)")
            os.fsync(fd)
        return entry

    def read(self) -> list[SpoolEntry]:
        """The entries in order; a torn last line (a crash mid-write) is skipped."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                out.append(SpoolEntry(str(obj["id"]), dict(obj["session"]), list(obj["row"])))
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def replay(self, store: Any) -> int:
        """Store every spooled message through ``store`` (a SessionArchive); return how many.

        Runs under the spool's lock, so two processes never replay the same entries; raises what
        the archive raises when it still cannot write (the spool is then left as it was).
        """
        if not self.pending():
            return 0
        with self._locked(os.O_RDWR | os.O_CREAT) as fd:
            entries = self.read()
            if not entries:
                os.ftruncate(fd, 0)
                return 0
            stored = int(store._store_spooled(entries))
            os.ftruncate(fd, 0)
            os.fsync(fd)
            return stored


def already_stored(con: sqlite3.Connection, entry_id: str) -> bool:
    return con.execute("SELECT 1 FROM meta WHERE key = ?", (_META_PREFIX + entry_id,)).fetchone() \
        is not None


def mark_stored(con: sqlite3.Connection, entry_id: str, message_id: int) -> None:
    con.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                (_META_PREFIX + entry_id, str(message_id)))
