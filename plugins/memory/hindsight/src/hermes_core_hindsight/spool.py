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
        # the kernel's lock (an flock on ``.spool-<bank>.lock`` where the OS has one, so any
        # platform imports this module; threads of one process are serialised too)
        from hermes_core.atomic import locked

        self.directory.mkdir(parents=True, exist_ok=True)
        with locked(self._lock_path.with_suffix("")):
            yield

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

    def _draining_path(self, pid: int) -> Path:
        return self.directory / f"{self.path.stem}.draining-{pid}.jsonl"

    def _take(self) -> list[str]:
        """Move the spool's lines (and those of drains whose process died) into our draining
        file and return them. Called with the lock held."""
        mine = self._draining_path(os.getpid())
        sources = []
        for orphan in sorted(self.directory.glob(f"{self.path.stem}.draining-*.jsonl")):
            pid = orphan.stem.rsplit("-", 1)[-1]
            if orphan != mine and pid.isdigit() and not _pid_alive(int(pid)):
                sources.append(orphan)
        if self.path.exists():
            sources.append(self.path)
        lines: list[str] = []
        for source in sources:
            with open(source, encoding="utf-8") as fh:
                lines += [line if line.endswith("\n") else line + "\n" for line in fh if line.strip()]
        if lines:
            self._rewrite(mine, lines)
        for source in sources:
            source.unlink(missing_ok=True)
        return lines

    @staticmethod
    def _rewrite(path: Path, lines: list[str]) -> None:
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(lines)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def drain(self, send: Callable[[dict[str, Any]], None],
              refused: Callable[[BaseException], bool]) -> int:
        """Send spooled jobs in order with ``send`` until one fails; return how many left.

        Sent jobs leave the spool, and so do jobs whose error ``refused(exc)`` calls permanent
        (they move to the rejected file); after any other error that job and the later ones go
        back to the head of the spool and, when nothing could be sent, the error is raised.

        The lock is held only to move lines between files, never while sending: a slow server
        must not hold up :meth:`add` (called from the kernel's worker). While sending, the jobs
        sit in a per-process "draining" file, so a crash mid-drain loses nothing: the next drain
        adopts the file of a process that is gone.
        """
        with self._locked():
            lines = self._take()
        if not lines:
            return 0
        sent = 0
        error: BaseException | None = None
        rejected: list[dict[str, Any]] = []
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
                rejected.append(_rejected(job, str(exc)))
            sent += 1
        with self._locked():
            if rejected:
                self._write_lines(self.rejected_path, rejected)
            rest = lines[sent:]
            if rest:
                # the unsent jobs go first: they are older than what was added meanwhile
                try:
                    with open(self.path, encoding="utf-8") as fh:
                        rest += [line for line in fh if line.strip()]
                except FileNotFoundError:
                    pass
                self._rewrite(self.path, rest)
            self._draining_path(os.getpid()).unlink(missing_ok=True)
        if error is not None and sent == 0:
            raise error
        return sent


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rejected(job: dict[str, Any], reason: str) -> dict[str, Any]:
    return {**job, "rejected": reason, "rejected_at": time.time()}
