"""The background writer and its spool: order, retries, nothing lost on outage or shutdown."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from hermes_core_hindsight.client import HindsightRejected, HindsightUnavailable
from hermes_core_hindsight.spool import Spool
from hermes_core_hindsight.writer import RetainWriter

log = logging.getLogger("test.hindsight.writer")


class Sink:
    """A ``send`` that records jobs and fails on demand."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.fail: BaseException | None = None
        self.gate = threading.Event()
        self.gate.set()
        self.calls = 0

    def __call__(self, job):
        self.calls += 1
        self.gate.wait(5)
        if self.fail is not None:
            raise self.fail
        self.sent.append(job["n"])


def refused(exc: BaseException) -> bool:
    return isinstance(exc, HindsightRejected)


def writer_for(tmp_path, sink, **kw) -> RetainWriter:
    return RetainWriter(sink, Spool(tmp_path, "b"), refused=refused, logger=log,
                        backoff=0.01, **kw)


def spooled(tmp_path) -> list[int]:
    path = tmp_path / "spool-b.jsonl"
    return [json.loads(line)["n"] for line in path.read_text().splitlines()] if path.exists() else []


def test_jobs_are_sent_in_order_without_blocking_the_caller(tmp_path):
    sink = Sink()
    sink.gate.clear()
    writer = writer_for(tmp_path, sink)
    start = time.perf_counter()
    for n in range(20):
        writer.submit({"n": n})
    assert time.perf_counter() - start < 0.05, "submit must not wait for the server"
    assert writer.pending() == 20
    sink.gate.set()
    assert writer.flush(5)
    assert sink.sent == list(range(20))
    writer.close(1)


def test_outage_spools_then_recovery_sends_the_spool_first(tmp_path):
    sink = Sink()
    sink.fail = HindsightUnavailable("down")
    writer = writer_for(tmp_path, sink, attempts=3)
    writer.submit({"n": 1})
    writer.submit({"n": 2})
    assert writer.flush(5)
    assert spooled(tmp_path) == [1, 2]
    assert sink.calls == 3 + 1, "3 attempts for the first job, then one per job while failing"
    sink.fail = None
    writer.submit({"n": 3})
    assert writer.flush(5)
    assert sink.sent == [3, 1, 2] and spooled(tmp_path) == []
    assert writer.stats.as_dict() == {"rejected": 0, "sent": 1, "spool_sent": 2, "spooled": 2}
    writer.close(1)


def test_refused_job_goes_to_the_rejected_file(tmp_path):
    sink = Sink()
    sink.fail = HindsightRejected("bad item", status=422, detail="items.0.content: too long")
    writer = writer_for(tmp_path, sink)
    writer.submit({"n": 7})
    assert writer.flush(5)
    rejected = [json.loads(line) for line in (tmp_path / "rejected-b.jsonl").read_text().splitlines()]
    assert rejected[0]["n"] == 7 and "bad item" in rejected[0]["rejected"]
    assert sink.calls == 1 and spooled(tmp_path) == []
    writer.close(1)


def test_close_spools_what_was_not_sent_in_time(tmp_path):
    sink = Sink()
    sink.gate.clear()  # the server hangs
    writer = writer_for(tmp_path, sink)
    for n in range(4):
        writer.submit({"n": n})
    start = time.perf_counter()
    left = writer.close(0.2)
    assert time.perf_counter() - start < 2
    # the job in flight is kept too (it may be stored twice; never lost)
    assert left == 4 and sorted(spooled(tmp_path)) == [0, 1, 2, 3]
    writer.submit({"n": 9})  # after close: straight to the spool
    assert 9 in spooled(tmp_path)
    sink.gate.set()


def test_a_new_writer_sends_an_old_spool_first(tmp_path):
    Spool(tmp_path, "b").add([{"n": 1}, {"n": 2}])
    sink = Sink()
    writer = writer_for(tmp_path, sink)
    writer.submit({"n": 3})
    assert writer.flush(5)
    assert sink.sent == [1, 2, 3] and not (tmp_path / "spool-b.jsonl").exists()
    writer.close(1)


def test_full_queue_overflows_to_the_spool(tmp_path, caplog):
    sink = Sink()
    sink.gate.clear()
    writer = writer_for(tmp_path, sink, max_queued=2)
    for n in range(5):
        writer.submit({"n": n})
    assert writer.pending() <= 3  # 2 queued + 1 in flight; the rest went to the spool
    assert "waiting for the server" in caplog.text
    sink.gate.set()
    assert writer.flush(5)
    assert sorted(sink.sent) == [0, 1, 2, 3, 4], "the spool is drained once the server answers"
    writer.close(1)


def test_torn_spool_line_is_skipped(tmp_path):
    spool = Spool(tmp_path, "b")
    spool.add([{"n": 1}])
    with open(spool.path, "a") as fh:
        fh.write('{"n": 2, "trunc\n')
    spool.add([{"n": 3}])
    got = []
    assert spool.drain(lambda job: got.append(job["n"]), refused) == 3
    assert got == [1, 3] and spool.count() == 0


def test_drain_keeps_the_failed_job_and_the_rest(tmp_path):
    spool = Spool(tmp_path, "b")
    spool.add([{"n": 1}, {"n": 2}, {"n": 3}])

    def send(job):
        if job["n"] == 2:
            raise HindsightUnavailable("down again")

    assert spool.drain(send, refused) == 1
    assert spooled(tmp_path) == [2, 3]
    with pytest.raises(HindsightUnavailable):
        spool.drain(send, refused)


def test_the_draining_file_of_a_dead_process_is_adopted(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    orphan = tmp_path / f"spool-b.draining-{dead.stdout.strip()}.jsonl"
    orphan.write_text('{"n": 1}\n')  # a drain that crashed while sending job 1
    spool = Spool(tmp_path, "b")
    spool.add([{"n": 2}])
    got = []
    assert spool.drain(lambda job: got.append(job["n"]), refused) == 2
    assert got == [1, 2] and not orphan.exists()
