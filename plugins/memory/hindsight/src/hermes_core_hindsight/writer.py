"""The one background writer: retains leave the turn's path and reach the server in order.

The kernel calls ``sync_turn`` on its session worker; the provider turns the turn into a *job* (a
JSON-able dict) and hands it to :meth:`RetainWriter.submit`, which returns at once. A single daemon
thread sends jobs one at a time, in submission order, so turns of a session are appended to its
document in the order they happened.

A job that fails with a retryable error (server down, timeout, 5xx) is tried ``attempts`` times with
a growing pause, then set aside in the :class:`~.spool.Spool` on disk; once a send succeeds again,
the spool is sent before the next job. A job the server refuses (4xx) goes to the spool's rejected
file. While the server is known to be failing, queued jobs get a single attempt each, so a long
outage costs one connection attempt per turn rather than a backlog of retries.

:meth:`flush` waits (bounded) until everything submitted before the call has been dealt with;
:meth:`close` stops the thread and spools whatever it could not send in time, so nothing is lost
on shutdown (a job still in flight when the bound expires is spooled too: it may then be stored
twice, which is the lesser evil).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .spool import Spool

__all__ = ["RetainWriter", "WriterStats"]

Job = dict[str, Any]


class WriterStats:
    """Counters for doctor output, benchmarks and tests."""

    __slots__ = ("rejected", "sent", "spool_sent", "spooled")

    def __init__(self) -> None:
        self.sent = 0
        self.spooled = 0
        self.rejected = 0
        self.spool_sent = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class RetainWriter:
    """Sends jobs with ``send`` on one daemon thread; see the module docstring."""

    def __init__(
        self,
        send: Callable[[Job], None],
        spool: Spool,
        *,
        refused: Callable[[BaseException], bool],
        logger: logging.Logger,
        attempts: int = 3,
        max_queued: int = 500,
        backoff: float = 0.5,
        name: str = "hindsight-writer",
    ) -> None:
        self._send = send
        self.spool = spool
        self._refused = refused
        self._log = logger
        self._attempts = attempts
        self._max_queued = max_queued
        self._backoff = backoff
        self._cond = threading.Condition()
        self._queue: deque[Job] = deque()
        self._submitted = 0
        self._finished = 0
        self._inflight: Job | None = None
        self._closing = False
        self._failing = False  # the last attempt failed for a retryable reason
        self._kicks_asked = 0  # retry_spool() calls ...
        self._kicks_done = 0  # ... and how many the thread has answered
        self.stats = WriterStats()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------ the caller

    def submit(self, job: Job) -> None:
        """Queue ``job``; never blocks. After :meth:`close`, or when the queue is full, the job
        goes straight to the spool."""
        with self._cond:
            if not self._closing and len(self._queue) < self._max_queued:
                self._queue.append(job)
                self._submitted += 1
                self._cond.notify_all()
                return
            closing = self._closing
        if not closing:
            self._log.warning("hindsight: %d turns are waiting for the server; %s was set aside "
                              "in %s and will be sent later", self._max_queued,
                              job.get("label", "a turn"), self.spool.path)
        self.spool.add([job])
        self.stats.spooled += 1

    def retry_spool(self, timeout: float) -> bool:
        """Have the thread try to send the spool now (it otherwise waits for the next job) and
        wait for that attempt; ``False`` if it did not finish within ``timeout``."""
        with self._cond:
            self._kicks_asked += 1
            target = self._kicks_asked
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._kicks_done >= target or self._closing,
                                       timeout=max(0.0, timeout))

    def pending(self) -> int:
        """Jobs queued or being sent."""
        with self._cond:
            return len(self._queue) + (self._inflight is not None)

    def flush(self, timeout: float) -> bool:
        """Wait until every job submitted so far was sent, spooled or rejected; ``False`` if the
        bound expired first."""
        with self._cond:
            target = self._submitted
            return self._cond.wait_for(lambda: self._finished >= target, timeout=max(0.0, timeout))

    def close(self, timeout: float) -> int:
        """Flush for at most ``timeout`` seconds, stop the thread, spool what is left.

        Returns how many jobs were spooled by the close.
        """
        self.flush(timeout)
        with self._cond:
            self._closing = True
            left = list(self._queue)
            self._queue.clear()
            inflight = self._inflight
            self._cond.notify_all()
        self._thread.join(timeout=0.5)
        if inflight is not None and self._thread.is_alive():
            self._log.warning("hindsight: %s was still being sent at shutdown; it was also kept in "
                              "%s and may be stored twice", inflight.get("label", "a turn"),
                              self.spool.path)
            left.insert(0, inflight)
        if left:
            self.spool.add(left)
            self.stats.spooled += len(left)
            self._log.warning("hindsight: %d turn(s) not sent before shutdown were kept in %s; "
                              "they are sent when the server answers again", len(left),
                              self.spool.path)
        return len(left)

    # ------------------------------------------------------------------------------ the thread

    def _run(self) -> None:
        first = True
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing
                                    or self._kicks_asked > self._kicks_done)
                if self._closing:
                    return
                kicked = not self._queue  # retry_spool(): no new job, only the spool to send
                if not kicked:
                    job = self._queue.popleft()
                    self._inflight = job
                asked = self._kicks_asked
            if kicked:
                try:
                    self._drain_spool()
                except Exception:  # a bug here must not kill the only writer
                    self._log.exception("hindsight: sending the spool failed")
                with self._cond:
                    self._kicks_done = asked
                    self._cond.notify_all()
                continue
            try:
                if first and self.spool.path.exists():
                    self._drain_spool()  # a previous run left jobs: they come first
                first = False
                self._process(job)
            except Exception:  # a bug here must not kill the only writer
                self._log.exception("hindsight: the writer failed on %s; it was kept in %s",
                                    job.get("label", "a turn"), self.spool.path)
                self.spool.add([job])
            finally:
                with self._cond:
                    self._inflight = None
                    self._finished += 1
                    self._cond.notify_all()

    def _pause(self, seconds: float) -> bool:
        """Sleep unless closing; ``False`` when the writer is closing."""
        with self._cond:
            return not self._cond.wait_for(lambda: self._closing, timeout=seconds)

    def _process(self, job: Job) -> None:
        attempts = 1 if self._failing else self._attempts
        last: BaseException | None = None
        for attempt in range(attempts):
            try:
                self._send(job)
            except Exception as exc:
                if self._refused(exc):
                    self.spool.reject(job, str(exc))
                    self.stats.rejected += 1
                    self._log.error("hindsight: the server refused %s: %s (kept in %s)",
                                    job.get("label", "a turn"), exc, self.spool.rejected_path)
                    return
                last = exc
                if attempt + 1 < attempts and not self._pause(self._backoff * 2 ** attempt):
                    break
                continue
            self.stats.sent += 1
            if self._failing or self.spool.path.exists():
                self._failing = False
                self._drain_spool()
            return
        self._failing = True
        self.spool.add([job])
        self.stats.spooled += 1
        self._log.warning("hindsight: %s was kept in %s to be sent later: %s",
                          job.get("label", "a turn"), self.spool.path, last)

    def _drain_spool(self) -> None:
        try:
            sent = self.spool.drain(self._send, self._refused)
        except Exception as exc:
            self._failing = True
            self._log.info("hindsight: spooled turns not sent yet: %s", exc)
            return
        if sent:
            self.stats.spool_sent += sent
            self._log.info("hindsight: sent %d spooled turn(s)", sent)

