"""The spool: retains that could not be sent, kept on disk until the server takes them.

When the server is down longer than the writer's retries, or shutdown comes before the queue is
drained, a turn is not dropped: it is appended, as one JSON line, to
``$HERMES_CORE_HOME/hindsight/spool-<bank>.jsonl``. The writer sends the spooled jobs first the next
time the server answers (in this process or a later one). Jobs the server *refused* (HTTP 4xx)
would be refused again; they go to ``rejected-<bank>.jsonl`` with the server's reason, for a human
to look at, instead of being retried forever.

Appends and rewrites hold an exclusive ``flock`` on a lock file beside the spool, so two agents on
one home never interleave lines or lose each other's jobs; a rewrite goes through a temporary file
and ``os.replace``, so a crash leaves either the old or the new spool, never half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["Spool"]


class Spool:
    """A JSONL file of pending jobs (dicts), shared safely between processes."""

    def __init__(self, directory: Path, bank: str) -> None:
        self.directory = directory
        self.path = directory / f"spool-{bank}.jsonl"
        self.rejected_path = directory / f"rejected-{bank}.jsonl"
        self._lock_path = directory / f".spool-{bank}.lock"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def _write_lines(path: Path, records: list[dict[str, Any]]) -> None:
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(lines)
            fh.flush()
            os.fsync(fh.fileno())

    def _append(self, path: Path, records: list[dict[str, Any]]) -> None:
        with self._locked():
            self._write_lines(path, records)

    def add(self, jobs: list[dict[str, Any]]) -> None:
        """Keep ``jobs`` for a later attempt."""
        if jobs:
            self._append(self.path, jobs)

    def reject(self, job: dict[str, Any], reason: str) -> None:
        """Set aside a job the server refused, with its reason."""
        self._append(self.rejected_path, [_rejected(job, reason)])

    def count(self) -> int:
        """How many jobs wait in the spool."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                return sum(1 for line in fh if line.strip())
        except FileNotFoundError:
            return 0

    def drain(self, send: Callable[[dict[str, Any]], None],
              refused: Callable[[BaseException], bool]) -> int:
        """Send spooled jobs in order with ``send`` until one fails; return how many left.

        Sent jobs leave the spool, and so do jobs whose error ``refused(exc)`` calls permanent
        (they move to the rejected file); after any other error that job and the later ones stay
        and, when nothing could be sent, the error is raised.
        """
        with self._locked():
            try:
                with open(self.path, encoding="utf-8") as fh:
                    lines = [line for line in fh if line.strip()]
            except FileNotFoundError:
                return 0
            sent = 0
            error: BaseException | None = None
            for line in lines:
                try:
                    job = json.loads(line)
                except ValueError:
                    sent += 1  # a torn line (crash mid-write) cannot be sent; drop it, keep going
                    continue
                try:
                    send(job)
                except Exception as exc:
                    if not refused(exc):
                        error = exc
                        break
                    self._write_lines(self.rejected_path, [_rejected(job, str(exc))])
                sent += 1
            rest = lines[sent:]
            if rest:
                tmp = self.path.with_suffix(".tmp")
                with open(tmp, "w", encoding="utf-8") as fh:
                    fh.writelines(rest)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            else:
                self.path.unlink(missing_ok=True)
        if error is not None and sent == 0:
            raise error
        return sent


def _rejected(job: dict[str, Any], reason: str) -> dict[str, Any]:
    return {**job, "rejected": reason, "rejected_at": time.time()}
