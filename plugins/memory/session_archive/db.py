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

The write gate (:class:`WriteGate`): writers of one state.db queue on an OS lock instead of
polling SQLite's.

Why: SQLite's busy handler makes a writer that finds the file locked *sleep and poll* (1, 2, 5,
... then 100 ms between tries). With several processes appending at once, a writer that has
waited a while polls rarely, and whoever is awake when the lock is released takes it: measured
with 4 writer processes, an append waited over a second at p99.9 and 4 s at worst, while one
writer alone took 8 ms at p99.9.

The gate is an exclusive ``flock`` on ``<state.db>.lock`` held for the length of one write
transaction. A waiting writer sleeps in the kernel and is woken the moment the lock is free, so the
wait is the time the writers ahead of it take, not a polling interval. After releasing, a writer
yields the processor, so a woken waiter gets the lock before the writer that just left can come
back for it. SQLite's own locking stays underneath, unchanged: processes that do not use the gate
(an older hermes-core, the sqlite3 shell) are still safe, they only do not queue.

The wait is bounded by ``busy_timeout``: the blocking ``flock`` runs on a helper thread that the
writer stops waiting for at the deadline (if it gets the lock later, it releases it at once).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from hermes_core.private import private_sqlite
from hermes_core.storage.dialect import Spelling, purge_wal

from .errors import (
    ArchiveBusyError,
    ArchiveCorruptError,
    ArchiveError,
    ArchiveFullError,
    ArchiveReadOnlyError,
    ArchiveVersionError,
)
from .schema import APPLICATION_ID, LATEST_VERSION, migrate, register_functions

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no gate, SQLite's busy handling alone
    fcntl = None  # type: ignore[assignment]

__all__ = ["Database", "GateTimeout", "WriteGate", "connect_read_only", "recovery_advice",
           "spool_path"]

log = logging.getLogger("hermes_core.plugins.session_archive")

T = TypeVar("T")
_MAGIC = b"SQLite format 3\x00"
#: commits between two background checkpoints (well under 1 MB of WAL at typical message sizes)
CHECKPOINT_EVERY = 100
#: WAL pages after which the writer copies the (small) remainder itself, so the WAL can restart
WRITER_CHECKPOINT_PAGES = 2000
#: files up to this size are integrity-checked before open returns (about 0.15 s at 32 MB, some
#: 50,000 messages); larger ones are checked on a background thread
SYNC_CHECK_BYTES = 32 * 1024 * 1024


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _corrupt(path: Path, exc: BaseException | str) -> ArchiveCorruptError:
    return ArchiveCorruptError(
        f"{path} is not a usable session archive ({exc}). The file was left untouched. Run "
        f"'hermes-core doctor' for details. {recovery_advice(path)}"
    )


def recovery_advice(path: Path) -> str:
    """What to do with a damaged archive: keep it, recover what SQLite can read from it."""
    return (
        f"Keep the file (it holds your session history): stop hermes-core, copy it "
        f"(cp {path} {path}.damaged), then recover what is readable with "
        f"'sqlite3 {path}.damaged .recover | sqlite3 {path}.recovered' and move the recovered "
        f"file in place of {path.name}. Messages that could not be stored meanwhile wait in "
        f"{spool_path(path).name} and are written once the archive works again"
    )


def spool_path(path: Path) -> Path:
    """The side file holding messages the archive could not store (see spool.py)."""
    return path.with_name(f"{path.name}.spool.jsonl")


def _connect_ro(path: Path, timeout: float, *, immutable: bool) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro" + (
        "&immutable=1" if immutable else "")
    return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None,
                           check_same_thread=False)


def connect_read_only(path: Path, *, timeout: float = 5.0) -> tuple[sqlite3.Connection, str | None]:
    """A connection that can never write ``path``, and a note when recent changes are unseen.

    ``mode=ro`` is tried first. A WAL database in a folder the process may not write cannot even
    be read that way (readers need the ``-shm`` file), so then it is opened ``immutable``: SQLite
    reads the main file without locks. Changes still in a ``-wal`` file are not seen then; the note
    says so.
    """
    con = _connect_ro(path, timeout, immutable=False)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return con, None
    except sqlite3.OperationalError as exc:
        con.close()
        text = str(exc).lower()
        if "readonly" not in text and "unable to open" not in text:
            raise
    con = _connect_ro(path, timeout, immutable=True)
    note = None
    wal = Path(f"{path}-wal")
    with contextlib.suppress(OSError):
        if wal.stat().st_size > 0:
            note = (f"{path} was opened read-only; the latest changes in {wal.name} cannot be "
                    "read until its folder is writable again")
    return con, note


class Database(Spelling):
    """One read-write connection to state.db, serialised by a lock, plus the checkpointer."""

    #: errors after which the archive runs a write once more (PostgreSQL: a unique violation)
    retried: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 30.0,
        synchronous: Literal["normal", "full"] = "full",
        background_checkpoints: bool = True,
        read_only: bool = False,
        integrity_check: bool = True,
    ) -> None:
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.read_only = read_only
        #: set when a read-only open cannot see the latest changes (see connect_read_only)
        self.note: str | None = None
        self.lock = threading.RLock()
        self._commits = 0
        self._closed = False
        self._wake = threading.Event()
        self._checkpointer: threading.Thread | None = None
        #: damage the background integrity check found (large files are checked off the open path)
        self._damage: ArchiveCorruptError | None = None
        self._check_header()
        #: the write gate (WriteGate); None for a read-only archive: nothing to queue for
        self._gate: WriteGate | None = None
        if read_only:
            self._open_read_only()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._gate = WriteGate(self.path)
        private_sqlite(self.path)  # 0600, and so its -wal/-shm (SQLite copies the mode)
        self.con = self._connect()
        background_check = integrity_check and self._size() > SYNC_CHECK_BYTES
        with self._closed_on_error():
            self._check_identity()  # before anything that writes, such as the journal mode
            if integrity_check and not background_check:
                self._check_integrity(self.con)
            self._configure(synchronous, background_checkpoints)
        with self._closed_on_error(upgrade=True):
            migrate(self.con, self._begin)
        if background_check:
            threading.Thread(target=self._check_in_background, name="session-archive-check",
                             daemon=True).start()
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

    def _open_read_only(self) -> None:
        """Open for reading only: nothing is configured, migrated or checkpointed."""
        if not self.path.exists():
            raise ArchiveError(f"{self.path} does not exist; nothing to read")
        try:
            self.con, self.note = connect_read_only(self.path, timeout=self.busy_timeout)
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc) from exc
        register_functions(self.con)
        self.wal = False
        with self._closed_on_error():
            self._check_identity()
            version = self.con.execute("PRAGMA user_version").fetchone()[0]
        if 0 < version < LATEST_VERSION:
            self.con.close()
            raise ArchiveReadOnlyError(
                f"{self.path} has schema version {version} and must be upgraded to "
                f"{LATEST_VERSION} before it can be read, which needs write access: run any "
                "hermes-core command once where the file and its folder are writable"
            )

    @contextlib.contextmanager
    def _closed_on_error(self, *, upgrade: bool = False) -> Iterator[None]:
        """The connection closed when the block fails, an SQLite error made the archive's (with
        ``upgrade``, one that is not says the upgrade failed)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            self.con.close()
            error = self._translate(exc)
            if upgrade and not isinstance(error, ArchiveError):
                error = ArchiveError(
                    f"upgrading {self.path} to schema version {LATEST_VERSION} failed ({exc}); "
                    "the upgrade was rolled back and the file is as it was. Report this with "
                    "the message")
            raise error from exc
        except BaseException:
            self.con.close()
            raise

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _check_integrity(self, con: sqlite3.Connection) -> None:
        """``PRAGMA quick_check``: a file damaged in its middle pages is reported at open, with
        what to do, instead of failing every later append."""
        try:
            rows = con.execute("PRAGMA quick_check(5)").fetchall()
        except sqlite3.DatabaseError as exc:
            raise _corrupt(self.path, f"integrity check failed: {exc}") from exc
        problems = [str(r[0]) for r in rows]
        if problems != ["ok"]:
            raise _corrupt(self.path, "integrity check failed: " + "; ".join(problems))

    def _check_in_background(self) -> None:
        """The same check for a large file (about 5 ms per MB), off the opening path; damage found
        refuses every later write with the same clear error (the messages go to the spool)."""
        try:
            con, _note = connect_read_only(self.path, timeout=self.busy_timeout)
        except sqlite3.Error as exc:
            log.debug("background integrity check skipped: %s", exc)
            return
        try:
            self._check_integrity(con)
        except ArchiveCorruptError as exc:
            self._damage = exc
            log.error("%s", exc)
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        register_functions(con)
        con.execute("PRAGMA secure_delete = ON")  # a forgotten row leaves no bytes behind
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

    def _locked(self) -> ArchiveBusyError:
        return ArchiveBusyError(
            f"{self.path} stayed locked by another process for {self.busy_timeout:.0f}s; "
            "nothing was written. Retry, or raise session_archive.busy_timeout"
        )

    @contextlib.contextmanager
    def _writing(self, busy: Callable[[Exception], Exception]) -> Iterator[None]:
        """One write: queued on the write gate (:class:`WriteGate`), refused when the archive cannot be
        written, its SQLite errors made the archive's (another process holding the lock too
        long: ``busy(error)``), and counted for the background checkpoints."""
        with self.lock:
            try:
                with (contextlib.nullcontext() if self._gate is None
                      else self._gate.hold(self.busy_timeout)):
                    self._ensure_writable()
                    try:
                        yield
                    except sqlite3.DatabaseError as exc:
                        error = self._translate(exc)
                        raise (busy(error) if isinstance(error, ArchiveBusyError) else
                               error) from exc
            except GateTimeout as exc:
                raise self._locked() from exc
            self._commits += 1
            if self._commits % CHECKPOINT_EVERY == 0 and self._checkpointer is not None:
                self._wake.set()

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one write transaction; retried as a whole while the file is busy."""
        def attempt() -> T:
            self.con.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self.con)
                self.con.execute("COMMIT")
            except BaseException:
                if self.con.in_transaction:
                    self.con.execute("ROLLBACK")
                raise
            return result

        with self._writing(lambda _error: self._locked()):
            return self._retry(attempt)

    def write_one(self, sql: str, params: Any = ()) -> int:
        """Run one statement as its own transaction (autocommit); return the last rowid.

        The hot path of an append: no BEGIN/COMMIT round trips, and still atomic, because SQLite
        wraps a single statement (with everything its triggers do) in one transaction.
        """
        with self._writing(lambda error: ArchiveBusyError(f"{error} Nothing was written.")):
            return int(self._retry(lambda: self.con.execute(sql, params).lastrowid) or 0)

    def insert_many(self, con: Any, sql: str, rows: Sequence[Any]) -> list[int]:
        """The INSERT ``sql`` once per row, on ``con`` (in a write); the new rows' ids."""
        return [int(con.execute(sql, row).lastrowid or 0) for row in rows]

    def read(self, sql: str, params: Any = ()) -> list[Any]:
        """Run one query and return all rows."""
        with self.lock:
            self._ensure_open()
            try:
                return self._retry(lambda: self.con.execute(sql, params).fetchall())
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
        if "full" in text:
            return ArchiveFullError(
                f"{self.path}: the disk is full (or the database reached its size limit): "
                f"{exc}. Free some space; nothing already stored is affected"
            )
        if "unable to open" in text or "readonly" in text or "disk i/o" in text:
            return ArchiveError(f"cannot use {self.path}: {exc}. Check the file's permissions "
                                "and the disk")
        return exc

    def _ensure_open(self) -> None:
        if self._closed:
            raise sqlite3.ProgrammingError(f"the session archive at {self.path} is closed")

    def _ensure_writable(self) -> None:
        self._ensure_open()
        if self._damage is not None:
            raise self._damage
        if self.read_only:
            raise ArchiveReadOnlyError(
                f"{self.path} was opened read-only (the file or its folder is not writable); "
                "nothing was written"
            )

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

    def purge_wal(self) -> bool:
        """After a forget: the WAL copied in and truncated, without waiting (see
        :func:`hermes_core.storage.dialect.purge_wal`); True if it was."""
        if not self.wal or self.read_only or self._closed:
            return False
        with self.lock:
            return purge_wal(self.con, busy_ms=int(self.busy_timeout * 1000))

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
                if self.wal and not self.read_only:
                    self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as exc:  # another process is reading: its close will do it
                log.debug("closing checkpoint skipped: %s", exc)
            self.con.close()
            if self._gate is not None:
                self._gate.close()


class GateTimeout(Exception):
    """The gate stayed held by another writer for the whole timeout."""


class WriteGate:
    """An exclusive cross-process lock around each write transaction of one database."""

    def __init__(self, db_path: Path) -> None:
        self.path = Path(f"{db_path}.lock")
        self._fd: int | None = None
        if fcntl is None:
            return
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            self._fd = None  # a read-only folder: no gate, SQLite's locking alone

    @property
    def active(self) -> bool:
        return self._fd is not None

    @contextlib.contextmanager
    def hold(self, timeout: float) -> Iterator[None]:
        """Hold the gate for the body; :class:`GateTimeout` after ``timeout`` seconds of waiting."""
        fd = self._fd
        if fd is None:
            yield
            return
        self._acquire(fd, timeout)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.sched_yield()  # let a woken waiter take it before this writer comes back

    def _acquire(self, fd: int, timeout: float) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        got = threading.Event()
        abandoned = threading.Event()
        lock = threading.Lock()

        def wait_in_kernel() -> None:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with lock:
                if abandoned.is_set():
                    fcntl.flock(fd, fcntl.LOCK_UN)  # nobody wants it any more
                else:
                    got.set()

        threading.Thread(target=wait_in_kernel, name="archive-write-gate", daemon=True).start()
        if got.wait(timeout):
            return
        with lock:
            if got.is_set():
                return
            abandoned.set()
        raise GateTimeout(f"{self.path} was held by another writer for {timeout:.0f}s")

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
