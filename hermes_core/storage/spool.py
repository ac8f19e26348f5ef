"""A durable spool: records kept on disk until whoever consumes them says they were delivered.

A plugin that must not lose a write it cannot make right now (the server is down, the database
is full) appends the write to a :class:`Spool` and delivers it later. The guarantees:

* **durable before returning**: :meth:`Spool.append` writes every record as one JSON line with a
  single ``write`` and ``fsync`` under the spool's lock, so a record the caller was told about
  survives ``kill -9`` and a power cut;
* **in order, at least once**: :meth:`Spool.pending` returns the records in the order they were
  appended; a record leaves the spool only when :meth:`Spool.ack` is called for it. A consumer
  that dies between delivering a record and acknowledging it delivers it again next time, so a
  consumer needing *exactly* once keeps its own note of what it stored (the session archive does);
* **never torn**: a line cut short by a crash is never read as a record and never glues itself
  to the next one (an append first ends an unfinished last line); :meth:`Spool.ack` moves such
  lines to ``<path>.unreadable`` for a person to look at, with an error in the log;
* **one consumer at a time**: :meth:`Spool.consuming` holds a second lock, across threads and
  processes, while records are delivered; appending never waits for it;
* **bounded**: a spool holds at most ``max_bytes`` (64 MiB unless said otherwise); an append past
  it raises :class:`SpoolFullError` (an ``OSError``) naming the file and what to do, and nothing
  already in the spool is touched;
* **scrubbable**: :meth:`Spool.scrub` removes or rewrites the pending records a function picks
  (a ``forget``), under the spool's lock; a delivery under way sends none of them afterwards, and
  a record it was sending at that moment is reported (:class:`Scrub`), never silently sent;
* **private and portable**: files are created ``0600``; the locks are the kernel's
  :func:`hermes_core.atomic.locked`, an ``flock`` where the OS has one and a thread lock elsewhere.

A record is a JSON object. A record's :attr:`SpoolEntry.key` is the digest of its line, so
acknowledging removes one line with that content: identical records are interchangeable. The file
is removed once it holds nothing.

:meth:`Spool.deliver` is the common loop: send each pending record, acknowledge it, set aside
the records the receiver refuses for good, stop at the first other failure. A :class:`Courier`
is a plugin's outbox over it: every write is appended first, then delivered on the caller's
thread while the receiver answers, and in the background (one attempt at a time, through
``PluginContext.run_later``) while it does not.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import atomic_write, locked
from ..private import private_dir

__all__ = ["DEFAULT_MAX_BYTES", "Courier", "Delivery", "Scrub", "Spool", "SpoolEntry",
           "SpoolFullError"]

log = logging.getLogger("hermes_core.storage.spool")

Record = dict[str, Any]

#: the default bound of one spool file
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
#: acknowledgements are written in batches of this many during :meth:`Spool.deliver` (a crash
#: between two batches delivers at most this many records a second time)
ACK_BATCH = 16


class SpoolFullError(OSError):
    """The spool reached its size bound; the record was not kept."""


@dataclass(frozen=True, slots=True)
class SpoolEntry:
    """One pending record and the key that acknowledges it."""

    key: str
    record: Record


@dataclass(slots=True)
class Delivery:
    """How one :meth:`Spool.deliver` went."""

    sent: int = 0
    #: records the receiver refused for good, moved to the ``rejected`` spool
    rejected: int = 0
    #: the failure that stopped delivery (the record it was for and the later ones wait)
    error: BaseException | None = None
    #: records still waiting when it stopped
    left: int = 0
    #: the refused records and why they were refused, in order
    refusals: list[tuple[Record, BaseException]] = field(default_factory=list)


@dataclass(slots=True)
class Scrub:
    """What one :meth:`Spool.scrub` did."""

    #: the pending records it dropped or rewrote (as they were), oldest first
    removed: list[Record] = field(default_factory=list)
    #: records it would have changed that a delivery of this process had already sent (or
    #: refused) and not yet acknowledged, or was sending: they reached the receiver (or are
    #: reaching it), so the caller deletes them there or says it could not
    in_flight: list[Record] = field(default_factory=list)
    #: False when a record in ``in_flight`` was still being sent when the wait ran out
    settled: bool = True
    #: records of the ``rejected`` spool it dropped or rewrote (as they were), oldest first
    rejected: list[Record] = field(default_factory=list)
    #: unreadable lines it dropped (``mentions`` held), ``.unreadable`` files included
    unreadable: list[str] = field(default_factory=list)


def _identity(path: Path) -> tuple[int, int] | None:
    """The file at ``path`` (device, inode): a rewrite makes a new one, an append does not."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _key(line: bytes) -> str:
    import hashlib  # loads OpenSSL: paid when a spool is read, not by an import

    return hashlib.blake2b(line.strip(), digest_size=12).hexdigest()


def _mentioned(line: bytes, mentions: Callable[[str], bool]) -> str | None:
    """An unreadable line's text when ``mentions`` holds for it, as written or with its JSON
    string escapes (``\\n``, ``\\u00e9``) decoded (a subject split by a line break is found)."""
    raw = line.decode("utf-8", "replace").strip()
    simple = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
    decoded = re.sub(r'\\(u[0-9a-fA-F]{4}|["\\/bfnrt])', lambda m: chr(int(m[1][1:], 16))
                     if m[1][0] == "u" else simple.get(m[1], m[1]), raw)
    return raw if mentions(raw) or (decoded != raw and mentions(decoded)) else None


def _parse(line: bytes) -> Record | None:
    if not line.endswith(b"\n"):
        return None  # cut short by a crash
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Spool:
    """An append-only file of JSON records at ``path``; see the module docstring."""

    def __init__(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._consumer = self.path.with_name(self.path.name + ".consumer")
        #: what a delivery of this process is sending (a key) and has sent and not acknowledged
        self._cond = threading.Condition()
        self._sending: str | None = None
        self._out: Counter[str] = Counter()

    # ------------------------------------------------------------------------------ writing

    def append(self, *records: Record) -> None:
        """Keep ``records`` durably, in order; raise ``OSError`` (:class:`SpoolFullError` at the
        bound) when they could not be kept, leaving the spool as it was."""
        if not records:
            return
        data = b"".join(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in records)
        private_dir(self.path.parent)
        with locked(self.path):
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _BINARY, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size + len(data) > self.max_bytes:
                    raise SpoolFullError(
                        errno.ENOSPC,
                        f"the spool {self.path} holds {size} bytes and may hold "
                        f"{self.max_bytes}: {len(records)} record(s) were not kept; once the "
                        "receiver answers again it empties (or move the file aside)")
                if size and _last_byte(fd, size) != b"\n":
                    data = b"\n" + data  # end the line a crash cut short; it stays unreadable
                written = os.write(fd, data)
                if written != len(data):  # a full disk: take the partial line back
                    os.ftruncate(fd, size)
                    raise OSError(errno.ENOSPC, f"short write to the spool {self.path} (disk full?)")
                os.fsync(fd)
            finally:
                os.close(fd)

    # ------------------------------------------------------------------------------ reading

    def has_pending(self) -> bool:
        """Whether the spool holds anything (one ``stat``)."""
        try:
            return self.path.stat().st_size > 0
        except OSError:
            return False

    def pending(self) -> list[SpoolEntry]:
        """The records waiting, oldest first (unreadable lines are left out)."""
        entries = []
        for line in self._lines():
            record = _parse(line)
            if record is not None:
                entries.append(SpoolEntry(_key(line), record))
        return entries

    def __len__(self) -> int:
        return len(self.pending())

    def _lines(self) -> list[bytes]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        return [line for line in data.splitlines(keepends=True) if line.strip()]

    # -------------------------------------------------------------------------- consuming

    @contextlib.contextmanager
    def consuming(self) -> Iterator[list[SpoolEntry]]:
        """Be the only consumer (waits for another one to finish) and get what is pending."""
        private_dir(self.path.parent)
        with locked(self._consumer):
            yield self.pending()

    def ack(self, entries: Iterable[SpoolEntry]) -> None:
        """Remove delivered records (one line per entry), and move unreadable lines aside."""
        self._ack(entries)

    def _ack(self, entries: Iterable[SpoolEntry]) -> tuple[int, int] | None:
        """:meth:`ack`; return the file's identity as the lock is released."""
        done = Counter(e.key for e in entries)
        with locked(self.path):
            self._remove(done)
            return _identity(self.path)

    def _remove(self, done: Counter[str]) -> None:
        lines = self._lines()
        keep, bad = [], []
        for line in lines:
            key = _key(line)
            if _parse(line) is None:
                bad.append(line if line.endswith(b"\n") else line + b"\n")
            elif done[key] > 0:
                done[key] -= 1
            else:
                keep.append(line)
        if len(keep) == len(lines):
            return  # nothing to remove
        if bad:
            aside = _unreadable(self.path)
            fd = os.open(aside, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _BINARY, 0o600)
            with os.fdopen(fd, "ab") as fh:  # private as the spool (one an older release made too)
                os.chmod(aside, 0o600)
                fh.writelines(bad)
                fh.flush()
                os.fsync(fh.fileno())
            log.error("%d unreadable line(s) of %s (cut short by a crash?) were moved to %s",
                      len(bad), self.path, aside)
        if keep:
            atomic_write(self.path, b"".join(keep))
        else:
            self.path.unlink(missing_ok=True)

    def deliver(
        self,
        send: Callable[[Record], None],
        *,
        refused: Callable[[BaseException], bool] = lambda exc: False,
        rejected: Spool | None = None,
        attempts: int = 1,
        pause: Callable[[int, BaseException], float] = lambda attempt, exc: 0.5 * 2 ** attempt,
        stop: threading.Event | None = None,
    ) -> Delivery:
        """Send the pending records in order with ``send``, as the only consumer.

        A record ``send`` accepted is acknowledged. A failure ``refused(exc)`` calls permanent
        moves the record to ``rejected`` (with ``rejected`` and ``rejected_at`` fields) and
        delivery goes on. Any other failure is tried ``attempts`` times in all, ``pause(attempt,
        exc)`` seconds apart (cut short when ``stop`` is set); then delivery stops, the record and
        the later ones wait, and :attr:`Delivery.error` says why.
        """
        report = Delivery()
        private_dir(self.path.parent)
        with locked(self._consumer):
            seen = _identity(self.path)
            queue = deque(self.pending())
            done: list[SpoolEntry] = []
            try:
                while True:
                    with self._cond:
                        now = _identity(self.path)
                        if now != seen:  # rewritten by a scrub: send what it left, in order
                            seen, held = now, Counter(e.key for e in done)
                            queue = deque(e for e in self.pending() if not _take(held, e.key))
                        if not queue:
                            break
                        entry = queue.popleft()
                        self._sending = entry.key
                    kept = False
                    try:
                        error = self._send_one(entry.record, send, refused, attempts, pause, stop)
                        kept = error is None or refused(error)
                    finally:
                        with self._cond:
                            self._sending = None
                            if kept:
                                self._out[entry.key] += 1
                            self._cond.notify_all()
                    if not kept:
                        report.error, report.left = error, len(queue) + 1
                        break
                    if error is not None:
                        (rejected if rejected is not None else self.rejected_spool()).append(
                            {**entry.record, "rejected": str(error), "rejected_at": time.time()})
                        report.rejected += 1
                        report.refusals.append((entry.record, error))
                    else:
                        report.sent += 1
                    done.append(entry)
                    if len(done) >= ACK_BATCH:
                        seen = self._acked(done)
                        done = []
            finally:
                self._acked(done)
        return report

    def _acked(self, done: list[SpoolEntry]) -> tuple[int, int] | None:
        try:
            return self._ack(done)
        finally:
            with self._cond:
                self._out -= Counter(e.key for e in done)
                self._cond.notify_all()

    def scrub(self, edit: Callable[[Record], Record | None], *, wait: float = 10.0,
              rejected: Spool | None = None, mentions: Callable[[str], bool] | None = None,
              dry_run: bool = False) -> Scrub:
        """Drop or rewrite pending records (a ``forget``): ``edit`` gets each record (a copy of
        its own) and returns it unchanged to keep it, ``None`` to drop it, or another record to
        take its place (same position: the order holds).

        Refused records (``rejected``, by default :meth:`rejected_spool`) are edited the same way
        (:attr:`Scrub.rejected`; a reason ``mentions`` holds for is blanked). With ``mentions``,
        unreadable lines (in the spool, the rejected spool, their ``.unreadable`` files) whose
        raw or JSON-unescaped text it holds for go (:attr:`Scrub.unreadable`). ``dry_run``: report.

        Done under the spool's lock: an append waits for it, and a delivery under way, in any
        process, sends none of the records it changed afterwards (it reads the spool again). A
        record that a delivery of this process is sending cannot be recalled: ``scrub`` waits up
        to ``wait`` seconds for that send to end, then lists it in :attr:`Scrub.in_flight`,
        untouched (with the records that delivery sent and has not acknowledged yet); a send that
        failed leaves its record pending, and it is scrubbed. The one record a delivery in
        *another* process is sending at that moment is not known here: it reaches the receiver.
        """
        result = Scrub()
        deadline = time.monotonic() + max(0.0, wait)
        aside = rejected if rejected is not None else self.rejected_spool()
        hold = (lambda path: contextlib.nullcontext()) if dry_run else locked  # a look locks nothing
        if aside.path.exists() or _unreadable(aside.path).exists():
            with hold(aside.path):  # appends of refused records wait
                result.rejected, lines = _scrub_file(aside.path, edit, mentions, dry_run)
                result.unreadable += lines + _scrub_file(_unreadable(aside.path), None,
                                                         mentions, dry_run)[1]
        if mentions is not None and _unreadable(self.path).exists():
            with hold(self.path):  # the lines an acknowledgement set aside
                result.unreadable += _scrub_file(_unreadable(self.path), None, mentions,
                                                 dry_run)[1]
        if not self.path.exists():
            return result
        waited: Record | None = None  # the record whose send it waited for
        while True:
            with hold(self.path), self._cond:
                out, busy, busy_key = Counter(self._out), None, self._sending
                removed: list[Record] = []
                landed: list[Record] = []
                keep: list[bytes] = []
                unread: list[str] = []
                for line in self._lines():
                    record = _parse(line)
                    new = edit(json.loads(line)) if record is not None else record
                    if record is None and mentions is not None:
                        text = _mentioned(line, mentions)
                        if text is not None:
                            unread.append(text)
                            continue
                    if record is None or new == record:
                        keep.append(line)
                        continue
                    key = _key(line)
                    if dry_run:
                        removed.append(record)
                        continue
                    if out[key] > 0 or (key == busy_key and busy is None):
                        keep.append(line)  # sent, or being sent: the caller is told
                        if out[key] > 0:
                            out[key] -= 1
                            landed.append(record)
                        else:
                            busy = record
                        continue
                    removed.append(record)
                    if new is not None:
                        keep.append(json.dumps(new, ensure_ascii=False).encode("utf-8") + b"\n")
                if waited is not None and waited not in removed and waited not in landed:
                    landed.append(waited)  # sent and acknowledged while it waited
                if busy is None or time.monotonic() >= deadline:
                    changed = not dry_run and bool(removed or unread)
                    if changed and keep:
                        atomic_write(self.path, b"".join(keep))
                    elif changed:
                        self.path.unlink(missing_ok=True)
                    result.removed, result.in_flight = removed, landed
                    result.unreadable += unread
                    if busy is not None:
                        result.in_flight.append(busy)
                        result.settled = False
                    return result
            waited = busy
            self._wait_sent(busy_key, deadline)  # the spool is free meanwhile: appends go on

    def _wait_sent(self, key: str | None, deadline: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._sending != key, max(0.0, deadline - time.monotonic()))

    @staticmethod
    def _send_one(record: Record, send: Callable[[Record], None],
                  refused: Callable[[BaseException], bool], attempts: int,
                  pause: Callable[[int, BaseException], float],
                  stop: threading.Event | None) -> BaseException | None:
        for attempt in range(max(1, attempts)):
            try:
                send(record)
                return None
            except Exception as exc:
                if refused(exc) or attempt + 1 >= attempts:
                    return exc
                seconds = pause(attempt, exc)
                if stop is not None and stop.wait(seconds):
                    return exc  # shutting down: the record waits for the next start
                if stop is None:
                    time.sleep(seconds)
        return None  # pragma: no cover - the loop always returns

    def rejected_spool(self) -> Spool:
        """Where refused records go unless told otherwise: ``<stem>.rejected.jsonl`` beside it."""
        return Spool(self.path.with_name(self.path.stem + ".rejected.jsonl"))


class Courier:
    """Writes to a receiver that may be down, never lost: a spool and its delivery.

    :meth:`put` appends the records durably, then delivers the spool on the caller's thread
    (a plugin calls it from a hook that already runs on its own lane, such as ``sync_turn``). A
    delivery that fails makes the courier *failing*: later puts only append, and one delivery at
    a time is queued with ``run_later`` (the plugin's ``PluginContext.run_later``), so an outage
    costs one attempt per write rather than a lane held by retries. The first delivery that gets
    through ends it. Records left at shutdown wait in the spool; the next start delivers them
    (:meth:`later`).
    """

    def __init__(
        self,
        spool: Spool,
        send: Callable[[Record], None],
        *,
        run_later: Callable[[Callable[[], None], str], bool],
        refused: Callable[[BaseException], bool] = lambda exc: False,
        rejected: Spool | None = None,
        attempts: int = 1,
        pause: Callable[[int, BaseException], float] = lambda attempt, exc: 0.5 * 2 ** attempt,
        report: Callable[[Delivery], None] = lambda delivery: None,
        label: str = "deliver the spool",
    ) -> None:
        self.spool = spool
        self.rejected = rejected
        self._send, self._refused, self._pause = send, refused, pause
        self._run_later, self._report, self._label = run_later, report, label
        self.attempts = attempts
        #: the last delivery failed: puts append only, deliveries go to the background
        self.failing = False
        #: set at shutdown: a retry pause ends, the record waits for the next start
        self.stop = threading.Event()
        self._cond = threading.Condition()
        self._queued = False
        self._busy = 0

    def put(self, *records: Record, now: bool = True) -> Delivery | None:
        """Keep ``records`` (``OSError`` if they could not be kept), then deliver: on this
        thread when ``now`` and the receiver answered last time, else in the background."""
        self.spool.append(*records)
        if now and not self.failing:
            return self.deliver()
        self.later()
        return None

    def deliver(self) -> Delivery:
        """Deliver the spool now, on this thread."""
        delivery = self.spool.deliver(
            self._send, refused=self._refused, rejected=self.rejected,
            attempts=1 if self.failing else self.attempts, pause=self._pause, stop=self.stop)
        self.failing = delivery.error is not None
        self._report(delivery)
        return delivery

    def later(self) -> bool:
        """Queue one background delivery (none if one is queued already); False if the host
        would not take it (the records wait for the next delivery)."""
        with self._cond:
            if self._queued or self.stop.is_set():
                return self._queued
            self._queued = True
            self._busy += 1

        def run() -> None:
            with self._cond:
                self._queued = False
            try:
                if not self.stop.is_set():
                    self.deliver()
            finally:
                self._done()

        if not self._run_later(run, self._label):
            with self._cond:
                self._queued = False
            self._done()
            return False
        return True

    def _done(self) -> None:
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no background delivery is queued or running; False after ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, max(0.0, timeout))

    def close(self) -> None:
        """Stop: a retry pause ends now and no background delivery starts."""
        self.stop.set()


def _unreadable(path: Path) -> Path:  # where an ack moves the spool's unreadable lines
    return path.with_name(path.name + ".unreadable")


def _scrub_file(path: Path, edit: Callable[[Record], Record | None] | None,
                mentions: Callable[[str], bool] | None, dry_run: bool) -> tuple[list[Record], list[str]]:
    """Edit the records of the file at ``path`` (no delivery reads it; its lock is held) and drop
    its unreadable lines ``mentions`` holds for; the records changed and the lines dropped."""
    try:
        lines = [line for line in path.read_bytes().splitlines(keepends=True) if line.strip()]
    except FileNotFoundError:
        return [], []
    changed: list[Record] = []
    dropped: list[str] = []
    keep: list[bytes] = []
    for line in lines:  # a .unreadable file (no ``edit``): every line is text
        record = _parse(line) if edit is not None else None
        if record is None:
            text = _mentioned(line, mentions) if mentions is not None else None
            keep += [line] if text is None else []
            dropped += [] if text is None else [text]
            continue
        new = edit(json.loads(line)) if edit is not None else record
        if new is not None and mentions is not None and mentions(str(new.get("rejected", ""))):
            new = {**new, "rejected": "(the reason quoted a forgotten subject)"}  # a server's echo
        if new == record:
            keep.append(line)
            continue
        changed.append(record)
        if new is not None:
            keep.append(json.dumps(new, ensure_ascii=False).encode("utf-8") + b"\n")
    if (changed or dropped) and not dry_run:
        if keep:
            atomic_write(path, b"".join(keep))
        else:
            path.unlink(missing_ok=True)
    return changed, dropped


def _take(held: Counter[str], key: str) -> bool:
    """Take one ``key`` from ``held``; whether there was one."""
    if held[key] > 0:
        held[key] -= 1
        return True
    return False


def _last_byte(fd: int, size: int) -> bytes:
    os.lseek(fd, size - 1, os.SEEK_SET)
    return os.read(fd, 1)
