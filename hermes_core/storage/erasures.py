"""The erasure generation: how a running server learns that something was erased from the stores.

``forget``, ``memory rollback`` and ``sessions delete`` run in their own process, beside a
``serve`` or ``mcp serve`` that holds live conversations: histories in memory, frozen prompt
snapshots, prepared recalls. Each of them, once its deletion is committed, adds one to the
*erasure generation*, a counter kept in the storage itself:

* without ``storage.url``: ``erasures.db`` in the home (a one-row SQLite table);
* with ``storage.url``: the ``erasure_generation`` table of the shared database (component
  ``erasures``), so every node of a service sees one counter.

A server reads the counter before each turn (one indexed read of one row on SQLite, microseconds;
on PostgreSQL a poll of a connection LISTENing for the notification each raise sends, with the row
read again only when one came or every few seconds) and compares it with the value its live
state was built under; when it moved, the host tells the plugins (``on_erasure``: drop frozen
snapshots and caches) and the dispatcher rebuilds each live conversation from the stores before
its next turn. Because the
counter is stored, a node that was down or cut off during the erasure sees it on its next turn.
Only the kind of erasure is recorded here, never what was erased; a forget also notes a digest of
its subject for the turns in flight (:mod:`.erasure_log`).
"""

from __future__ import annotations

import select
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import HermesCoreError
from ..private import private_sqlite
from .erasure_log import COMPONENT, GENERATION_SEED, GENERATION_TABLE, MIGRATIONS, ErasureLog
from .url import StorageURL, redact_url

__all__ = ["COMPONENT", "SQLITE_FILE", "ErasureLedger", "ErasureRecordError", "forget_noted",
           "note_forget", "record_erasure", "tell_running_servers"]

#: the SQLite file in the home (without ``storage.url``)
SQLITE_FILE = "erasures.db"
#: the PostgreSQL notification channel raised with the generation
CHANNEL = "hermes_core_erasures"
#: seconds after which a PostgreSQL reader reads the row even without a notification
RECHECK_SECONDS = 2.0
_READ = "SELECT generation FROM erasure_generation WHERE id = 1"


class ErasureRecordError(HermesCoreError):
    """The erasure generation could not be read or raised (the message names the store)."""


class ErasureLedger:
    """The erasure generation of one home (SQLite) or one ``storage.url`` database."""

    def __init__(self, home: Path, url: StorageURL | None = None) -> None:
        self.home = Path(home)
        self.url = url
        self.path = self.home / SQLITE_FILE
        self._con: sqlite3.Connection | None = None
        self._pool: Any = None
        self._reader: Any = None
        self._cached: int | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return self.url.redacted if self.url is not None else str(self.path)

    # --------------------------------------------------------------------------------- read

    def current(self) -> int:
        """The generation now (0 when nothing was ever erased). Never creates anything, so a
        read-only home or a server without write access reads it too."""
        try:
            if self.url is not None:
                return self._pg_current()
            return self._sqlite_current()
        except ErasureRecordError:
            raise
        except Exception as exc:
            raise ErasureRecordError(f"cannot read the erasure generation in {self.where}: "
                                     f"{_reason(exc)}") from None

    def _sqlite_current(self) -> int:
        with self._lock:
            if self._con is None:
                if not self.path.exists():
                    return 0  # nothing erased yet; the file appears with the first erasure
                self._con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                            check_same_thread=False, timeout=5.0)
            row = self._con.execute(_READ).fetchone()
        return int(row[0]) if row else 0

    def _pg_pool(self) -> Any:
        if self._pool is None:
            from .component import open_component

            assert self.url is not None
            self._pool = open_component(self.url, COMPONENT, MIGRATIONS)
        return self._pool

    def _pg_current(self) -> int:
        # A connection of its own, kept open and LISTENing on CHANNEL: raising the generation
        # notifies in the same transaction, so a turn's check is a poll of that connection's
        # socket (no round trip) and the row is read again only when a notification came, or
        # after RECHECK_SECONDS (a connection silently cut). A new or re-opened connection reads
        # the row first: what changed while a node was down or cut off is seen at once.
        from .pool import import_psycopg

        psycopg = import_psycopg()
        self._pg_pool()  # the table exists (migrated once per process)
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._pg_cached()
                except psycopg.OperationalError:
                    if self._reader is not None:
                        self._reader.close()  # the server dropped it: one fresh connection
                    self._reader = None
                    if attempt == 2:
                        raise
        return 0

    def _pg_cached(self) -> int:
        from .pool import CONNECT_TIMEOUT, import_psycopg

        now = time.monotonic()
        if self._reader is None or self._reader.closed:
            assert self.url is not None
            self._reader = import_psycopg().connect(self.url.url, autocommit=True,
                                                    connect_timeout=CONNECT_TIMEOUT)
            self._reader.execute(f"LISTEN {CHANNEL}")
            self._cached = None
        if self._cached is None or now - self._read_at > RECHECK_SECONDS or self._notified():
            row = self._reader.execute(_READ, prepare=True).fetchone()
            self._cached = int(row[0]) if row else 0
            self._read_at = now
        return self._cached

    def _notified(self) -> bool:
        """Whether anything arrived on the listening connection (a notification, or the server
        closing it: the read that follows then fails and reconnects)."""
        assert self._reader is not None
        pgconn = self._reader.pgconn
        ready, _, _ = select.select([pgconn.socket], [], [], 0)
        if not ready:
            return False
        pgconn.consume_input()
        while pgconn.notifies() is not None:
            pass
        return True

    # -------------------------------------------------------------------------------- write

    def record(self, what: str) -> int:
        """Raise the generation by one (``what``: the kind of erasure, e.g. ``"forget"``) and
        return the new value. Call it after the erasure is committed."""
        now = time.time()
        try:
            if self.url is not None:
                from .component import run_on

                def bump(con: Any) -> int:
                    row = con.execute(
                        "UPDATE erasure_generation SET generation = generation + 1, "
                        "recorded_at = %s, what = %s WHERE id = 1 RETURNING generation",
                        (now, what)).fetchone()
                    con.execute(f"NOTIFY {CHANNEL}")  # delivered at commit
                    return int(row[0])

                return int(run_on(self._pg_pool(), bump, retry=False))
            private_sqlite(self.path)
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            try:
                con.execute("BEGIN IMMEDIATE")
                con.execute(GENERATION_TABLE)
                con.execute(GENERATION_SEED)
                con.execute("UPDATE erasure_generation SET generation = generation + 1, "
                            "recorded_at = ?, what = ? WHERE id = 1", (now, what))
                row = con.execute("SELECT generation FROM erasure_generation").fetchone()
                con.execute("COMMIT")
            finally:
                con.close()
            return int(row[0])
        except Exception as exc:
            raise ErasureRecordError(
                f"the erasure was done, but running servers could not be told ({self.where}: "
                f"{_reason(exc)}); restart the running servers ('hermes-core serve' and the like) "
                "so that no live conversation keeps what was erased") from None

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
            if self._reader is not None:
                self._reader.close()
                self._reader = None
                self._cached = None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return redact_url(text.splitlines()[0]) if text else type(exc).__name__


def record_erasure(what: str, *, home: Path | None = None, storage_url: str | None = None,
                   config_url: bool = True) -> int:
    """Raise the erasure generation (see the module docstring) of ``home`` (default: this
    process's home) and ``storage_url`` (default: ``storage.url`` of its config when
    ``config_url``); raises :class:`ErasureRecordError` saying what to do when it cannot."""
    from ..paths import home_dir
    from .url import resolve_storage_url

    if home is None:
        home = home_dir()
    if storage_url is None and config_url:
        from ..config import load_config

        storage_url = load_config().core.storage.url
    ledger = ErasureLedger(home, resolve_storage_url(storage_url))
    try:
        return ledger.record(what)
    finally:
        ledger.close()


def tell_running_servers(what: str, **where: Any) -> int | None:
    """:func:`record_erasure` for a command: a failure is printed as a warning (the erasure
    itself is done), never raised."""
    try:
        return record_erasure(what, **where)
    except ErasureRecordError as exc:
        import click

        click.echo(f"warning: {exc}", err=True)
        return None


def _log_of(home: Path | None, storage_url: str | None) -> ErasureLog:
    from ..paths import home_dir
    from .url import resolve_storage_url

    return ErasureLog(home if home is not None else home_dir(), resolve_storage_url(storage_url))


def note_forget(subject: str, scope: str, *, home: Path | None = None,
                storage_url: str | None = None) -> int | None:
    """Before a forget deletes anything: note it for the turns in flight
    (:mod:`.erasure_log`); returns the note's id for :func:`forget_noted`. A failure is printed
    as a warning (the forget still runs; only a turn in flight may archive the subject again)."""
    log = _log_of(home, storage_url)
    try:
        return log.note("forget", subject, scope)
    except Exception as exc:
        import click

        click.echo(f"warning: turns in flight were not told of this forget ({_reason(exc)}); "
                   "an answer being written right now may keep the subject: run the forget "
                   "again once running conversations are idle", err=True)
        return None
    finally:
        log.close()


def forget_noted(note_id: int | None, *, home: Path | None = None,
                 storage_url: str | None = None) -> None:
    """The noted forget finished: conversations loaded from now on are clean of it."""
    if note_id is None:
        return
    log = _log_of(home, storage_url)
    try:
        log.done(note_id)
    except Exception as exc:  # the note stays pending: later writes keep checking it
        import click

        click.echo(f"warning: could not mark the forget done ({_reason(exc)})", err=True)
    finally:
        log.close()
