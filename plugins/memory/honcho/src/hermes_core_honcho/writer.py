"""Writes to Honcho on the provider's own thread: retried once, and never lost when Honcho is down.

The kernel calls ``sync_turn`` on its per-conversation worker, which every provider shares; a slow
Honcho must not delay the other providers' writes, so ``sync_turn`` only queues a *job* here and
returns. A job is plain data (a dict), so it can be written to disk:

* the writer thread runs jobs in order; a job that fails because Honcho is unreachable, busy (429,
  5xx) or answered junk is tried once more after ``retry_delay`` (longer if the server sent
  ``Retry-After``);
* a job that fails twice goes to the **outbox** (``$HERMES_CORE_HOME/honcho/outbox.jsonl``), and is
  sent again after the next write that succeeds, and at the next start;
* a job the server *rejects* (a 4xx other than 429: sending it again cannot help) is logged with the
  reason and kept in ``honcho/rejected.jsonl`` for a person to look at;
* at shutdown the queue gets ``shutdown_timeout`` seconds; what is still queued then goes to the
  outbox instead of being dropped. A job caught mid-request is kept too (flagged ``maybe_sent``):
  a duplicate message in Honcho is a smaller harm than a lost one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hermes_core.private import private_file

from .client import HonchoError, HonchoRejected, HonchoUnavailable

__all__ = ["Job", "Outbox", "Writer"]

Job = dict[str, Any]
log = logging.getLogger("hermes_core.plugins.honcho")


class Outbox:
    """An append-only JSONL file of jobs waiting for Honcho, rewritten whole when drained."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        with self._lock:
            private_file(self.path)  # queued messages are the user's words: 0600, folder 0700
            with self.path.open("a", encoding="utf-8") as fh:
                for job in jobs:
                    fh.write(json.dumps(job, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def take(self) -> list[Job]:
        """Remove and return every stored job (unreadable lines are kept aside, not dropped)."""
        with self._lock:
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                return []
            jobs, bad = [], []
            for line in lines:
                if not line.strip():
                    continue
                try:
                    job = json.loads(line)
                except ValueError:
                    bad.append(line)
                    continue
                if isinstance(job, dict):
                    jobs.append(job)
                else:
                    bad.append(line)
            if bad:
                aside = private_file(self.path.with_suffix(".unreadable"))
                with aside.open("a", encoding="utf-8") as fh:
                    fh.write("\n".join(bad) + "\n")
                log.error("honcho: %d unreadable line(s) of %s moved to %s", len(bad), self.path, aside)
            self.path.unlink()
            return jobs

    def __len__(self) -> int:
        with self._lock:
            try:
                with self.path.open(encoding="utf-8") as fh:
                    return sum(1 for line in fh if line.strip())
            except FileNotFoundError:
                return 0


class Writer:
    """A FIFO of jobs run by one daemon thread with ``perform(job)``; see the module docstring."""

    def __init__(self, perform: Callable[[Job], None], outbox: Outbox, rejected: Outbox, *,
                 retry_delay: float, name: str = "honcho-writer") -> None:
        self._perform = perform
        self.outbox = outbox
        self.rejected = rejected
        self.retry_delay = retry_delay
        self._cond = threading.Condition()
        self._queue: deque[Job] = deque()
        self._running: Job | None = None
        self._closed = False
        self._stop = threading.Event()
        self._submitted = 0
        self._finished = 0
        #: jobs stored / moved to the outbox / rejected, since start (for tests and doctor-like output)
        self.stored = 0
        self.spooled = 0
        self.refused = 0
        self.down_since: float | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> int:
        """Queue ``job``; returns its sequence number. After close, the job goes to the outbox."""
        with self._cond:
            if self._closed:
                self.outbox.append([job])
                self.spooled += 1
                return self._submitted
            self._submitted += 1
            self._queue.append(job)
            self._cond.notify_all()
            return self._submitted

    def resend_outbox(self) -> None:
        """Queue the outbox's jobs again (at start, and after a write succeeds)."""
        jobs = self.outbox.take()
        if jobs:
            log.info("honcho: sending %d job(s) kept in %s", len(jobs), self.outbox.path)
            with self._cond:
                for job in jobs:
                    job.pop("maybe_sent", None)
                    job["from_outbox"] = True
                    self._submitted += 1
                    self._queue.append(job)
                self._cond.notify_all()

    def wait_target(self) -> int:
        """The sequence number of the last job submitted (what :meth:`wait` waits for by default)."""
        with self._cond:
            return self._submitted

    def wait(self, seq: int | None = None, timeout: float | None = None) -> bool:
        """Wait until job ``seq`` (default: every job submitted so far) has finished."""
        with self._cond:
            target = self._submitted if seq is None else seq
            return self._cond.wait_for(lambda: self._finished >= target, timeout)

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._queue and self._running is None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                job = self._running = self._queue.popleft()
            stored = self._run(job)
            # Queue the outbox before this job counts as finished, so whoever waits for the queue
            # to drain also waits for what Honcho's return made sendable again.
            if stored and not job.get("from_outbox") and len(self.outbox):
                self.resend_outbox()
            with self._cond:
                self._running = None
                self._finished += 1
                self._cond.notify_all()

    def _run(self, job: Job) -> bool:
        for attempt in (1, 2):
            try:
                self._perform(job)
            except HonchoRejected as exc:
                self.refused += 1
                log.error("honcho: the server refused %s and it will not be retried: %s; the job is "
                          "kept in %s", describe(job), exc, self.rejected.path)
                self.rejected.append([{**job, "error": str(exc)}])
                return False
            except HonchoError as exc:
                if attempt == 1 and not self._stop.is_set():
                    delay = self.retry_delay
                    if isinstance(exc, HonchoUnavailable) and exc.retry_after is not None:
                        delay = max(delay, min(exc.retry_after, 30.0))
                    self._stop.wait(delay)
                    continue
                self._spool(job, exc)
                return False
            except Exception as exc:  # a bug in building the request: keep the data, say so
                log.exception("honcho: %s failed unexpectedly", describe(job))
                self._spool(job, exc)
                return False
            else:
                self.stored += 1
                if self.down_since is not None:
                    log.info("honcho: reachable again after %.0f s", time.time() - self.down_since)
                    self.down_since = None
                return True
        return False  # pragma: no cover - the loop always returns

    def _spool(self, job: Job, exc: BaseException) -> None:
        self.outbox.append([job])
        self.spooled += 1
        level = logging.WARNING if self.down_since is None else logging.DEBUG
        if self.down_since is None:
            self.down_since = time.time()
        log.log(level, "honcho: %s failed twice (%s); kept in %s and sent again once Honcho "
                "answers", describe(job), exc, self.outbox.path)

    def close(self, timeout: float) -> list[Job]:
        """Finish queued jobs within ``timeout``; move the rest to the outbox and return them."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._queue and self._running is None, timeout)
            left = list(self._queue)
            self._queue.clear()
            if self._running is not None:
                left.insert(0, {**self._running, "maybe_sent": True})
            self._stop.set()  # a pending retry pause ends now
            self._cond.notify_all()
        if left:
            self.outbox.append(left)
            self.spooled += len(left)
            log.warning("honcho: %d write(s) not finished within %.1f s at shutdown; kept in %s and "
                        "sent at the next start", len(left), timeout, self.outbox.path)
        return left


def describe(job: Job) -> str:
    kind = job.get("kind")
    if kind == "messages":
        return f"storing {len(job.get('messages', []))} message(s) of session {job.get('session')}"
    if kind == "session":
        return f"creating session {job.get('session')}"
    if kind == "conclude":
        return "storing a conclusion"
    if kind == "forget":
        return "deleting a conclusion"
    return f"job {kind!r}"
