"""The connection to state.db: WAL, busy handling with retries, corruption checks, checkpoints.

Writers in several processes share one file. SQLite's busy timeout makes a writer wait for the
lock; on top of it every write transaction is retried with jittered back-off until
``busy_timeout`` has passed, so "database is locked" never reaches a caller unless another process
really held the lock that long (then :class:`ArchiveBusyError` says so).

WAL checkpoints are mostly taken off the append path: a daemon thread with its own connection runs
PASSIVE checkpoints every few hundred commits (a PASSIVE checkpoint never blocks a writer). It
cannot finish the job alone: SQLite restarts the WAL only when a writer finds every frame already
copied, and a busy writer keeps adding frames. So the writer keeps a (raised) auto-checkpoint
threshold; when it fires, the background thread has already copied almost everything and the
writer only copies the remainder, which keeps that stall short and the WAL bounded.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from hermes_core.private import private_sqlite

from .errors import ArchiveBusyError, ArchiveCorruptError, ArchiveError, ArchiveVersionError
from .schema import APPLICATION_ID, LATEST_VERSION, migrate, register_functions

__all__ = ["Database"]

log = logging.getLogger("hermes_core.plugins.session_archive")

T = TypeVar("T")
_MAGIC = b"SQLite format 3\x00"
#: commits between two background checkpoints (well under 1 MB of WAL at typical message sizes)
CHECKPOINT_EVERY = 100
#: WAL pages after which the writer copies the (small) remainder itself, so the WAL can restart
WRITER_CHECKPOINT_PAGES = 2000


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _corrupt(path: Path, exc: BaseException | str) -> ArchiveCorruptError:
    return ArchiveCorruptError(
        f"{path} is not a usable session archive ({exc}). The file was left untouched. Run "
        f"'hermes-core doctor' for details; to start a new archive, move the file aside (it holds "
        f"your session history) and hermes-core will create a fresh one"
    )


class Database:
    """One read-write connection to state.db, serialised by a lock, plus the checkpointer."""

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 30.0,
        synchronous: Literal["normal", "full"] = "full",
        background_checkpoints: bool = True,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.lock = threading.RLock()
        self._commits = 0
        self._closed = False
        self._check_header()
        private_sqlite(self.path)  # 0600, and so its -wal/-shm (SQLite copies the mode)
        self.con = self._connect()
        try:
            self._check_identity()  # before anything that writes, such as the journal mode
            self._configure(synchronous, background_checkpoints)
        except sqlite3.DatabaseError as exc:
            self.con.close()
            raise self._translate(exc) from exc
        except BaseException:
            self.con.close()
            raise
        try:
            migrate(self.con, self._begin)
        except sqlite3.DatabaseError as exc:
            self.con.close()
            error = self._translate(exc)
            if isinstance(error, ArchiveError):
                raise error from exc
            raise ArchiveError(
                f"upgrading {self.path} to schema version {LATEST_VERSION} failed ({exc}); the "
                "upgrade was rolled back and the file is as it was. Report this with the message"
            ) from exc
        except BaseException:
            self.con.close()
            raise
        self._wake = threading.Event()
        self._checkpointer: threading.Thread | None = None
        if background_checkpoints and self.wal:
            self._checkpointer = threading.Thread(
                target=self._checkpoint_loop, name="session-archive-checkpoint", daemon=True
            )
            self._checkpointer.start()

    # ------------------------------------------------------------------------------------ open

    def _check_header(self) -> None:
        """Refuse a file that is not SQLite before SQLite gets a chance to touch it."""
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(len(_MAGIC))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ArchiveCorruptError(f"{self.path} cannot be read: {exc}") from exc
        if head and head != _MAGIC:
            raise _corrupt(self.path, "the file does not start with the SQLite header")

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        register_functions(con)
        return con

    def _configure(self, synchronous: str, background_checkpoints: bool) -> None:
        con = self.con
        con.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        con.execute("PRAGMA foreign_keys = ON")
        mode = self._retry(lambda: con.execute("PRAGMA journal_mode").fetchone()[0])
        if mode != "wal":
            try:
                mode = self._retry(lambda: con.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise
                # Network file systems refuse WAL's shared memory; keep working without it.
                log.warning("%s: WAL unavailable (%s); using the rollback journal", self.path, exc)
        self.wal = str(mode).lower() == "wal"
        con.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        if self.wal and background_checkpoints:
            con.execute(f"PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}")

    def _check_identity(self) -> None:
        con = self.con
        app_id = con.execute("PRAGMA application_id").fetchone()[0]
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if app_id not in (0, APPLICATION_ID):
            raise ArchiveCorruptError(
                f"{self.path} is an SQLite file of another application (application_id "
                f"{app_id:#x}); it was left untouched. Point session_archive.path elsewhere"
            )
        if app_id == 0 and version == 0:
            tables = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            if tables:
                raise ArchiveCorruptError(
                    f"{self.path} already holds {tables} tables that are not a hermes-core "
                    "archive; it was left untouched. Point session_archive.path elsewhere"
                )
        if version > LATEST_VERSION:
            raise ArchiveVersionError(
                f"{self.path} has schema version {version}, newer than this hermes-core knows "
                f"({LATEST_VERSION}); upgrade hermes-core. The file was left untouched"
            )

    # ------------------------------------------------------------------------------ transactions

    def _retry(self, fn: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.2)

    def _begin(self) -> None:
        self._retry(lambda: self.con.execute("BEGIN IMMEDIATE"))

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one write transaction; retried as a whole while the file is busy."""
        with self.lock:
            self._ensure_open()
            deadline = time.monotonic() + self.busy_timeout
            delay = 0.005
            while True:
                try:
                    self.con.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(self.con)
                        self.con.execute("COMMIT")
                    except BaseException:
                        if self.con.in_transaction:
                            self.con.execute("ROLLBACK")
                        raise
                    break
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise self._translate(exc) from exc
                    if time.monotonic() >= deadline:
                        raise ArchiveBusyError(
                            f"{self.path} stayed locked by another process for "
                            f"{self.busy_timeout:.0f}s; nothing was written. Retry, or raise "
                            "session_archive.busy_timeout"
                        ) from exc
                    time.sleep(delay * (0.5 + random.random()))
                    delay = min(delay * 2, 0.2)
                except sqlite3.DatabaseError as exc:
                    raise self._translate(exc) from exc
            self._commits += 1
            if self._commits % CHECKPOINT_EVERY == 0 and self._checkpointer is not None:
                self._wake.set()
            return result

    def write_one(self, sql: str, params: Any = ()) -> int:
        """Run one statement as its own transaction (autocommit); return the last rowid.

        The hot path of an append: no BEGIN/COMMIT round trips, and still atomic, because SQLite
        wraps a single statement (with everything its triggers do) in one transaction.
        """
        with self.lock:
            self._ensure_open()
            try:
                rowid = self._retry(lambda: self.con.execute(sql, params).lastrowid)
            except sqlite3.OperationalError as exc:
                error = self._translate(exc)
                if isinstance(error, ArchiveBusyError):
                    raise ArchiveBusyError(f"{error} Nothing was written.") from exc
                raise error from exc
            except sqlite3.DatabaseError as exc:
                raise self._translate(exc) from exc
            self._commits += 1
            if self._commits % CHECKPOINT_EVERY == 0 and self._checkpointer is not None:
                self._wake.set()
            return int(rowid or 0)

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """Run one query and return all rows."""
        with self.lock:
            self._ensure_open()
            try:
                return self._retry(lambda: self.con.execute(sql, params).fetchall())
            except sqlite3.OperationalError as exc:
                raise self._translate(exc) from exc
            except sqlite3.DatabaseError as exc:
                raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.DatabaseError) -> Exception:
        """The archive error for an SQLite error; other errors are returned as they are."""
        text = str(exc).lower()
        if "malformed" in text or "not a database" in text or "corrupt" in text:
            return _corrupt(self.path, exc)
        if _is_busy(exc):
            return ArchiveBusyError(
                f"{self.path} stayed locked by another process for {self.busy_timeout:.0f}s; "
                "retry, or raise session_archive.busy_timeout"
            )
        if "unable to open" in text or "readonly" in text or "disk i/o" in text:
            return ArchiveError(f"cannot use {self.path}: {exc}. Check the file's permissions "
                                "and the disk")
        return exc

    def _ensure_open(self) -> None:
        if self._closed:
            raise sqlite3.ProgrammingError(f"the session archive at {self.path} is closed")

    # ----------------------------------------------------------------------------- checkpoints

    def _checkpoint_loop(self) -> None:
        con: sqlite3.Connection | None = None
        try:
            while not self._closed:
                self._wake.wait(timeout=1.0)
                self._wake.clear()
                if self._closed:
                    break
                try:
                    if con is None:
                        con = sqlite3.connect(self.path, timeout=1.0, isolation_level=None,
                                              check_same_thread=False)
                    con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # busy or transient: the next round catches up
                    log.debug("background checkpoint skipped: %s", exc)
        finally:
            if con is not None:
                con.close()

    def close(self) -> None:
        """Checkpoint and truncate the WAL (best effort) and close; idempotent."""
        if self._closed:
            return
        with self.lock:
            self._closed = True
            self._wake.set()
            if self._checkpointer is not None:
                self._checkpointer.join(timeout=5.0)
            try:
                if self.wal:
                    self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:  # another process is reading: its close will do it
                log.debug("closing checkpoint skipped: %s", exc)
            self.con.close()
