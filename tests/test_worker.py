"""The per-conversation background worker (hermes_core.worker): order, drain, exit."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hermes_core.worker import SessionWorker, drain_all


@pytest.fixture
def release():
    event = threading.Event()
    yield event
    event.set()


def test_tasks_run_in_submission_order_on_one_thread():
    worker = SessionWorker(drain_timeout=2)
    seen: list[tuple[int, str]] = []
    for i in range(50):
        kind = "prefetch" if i % 3 == 0 else "write"
        worker.submit(f"t{i}", lambda i=i: seen.append((i, threading.current_thread().name)),
                      kind=kind)
    assert worker.flush(2)
    assert [i for i, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {worker.name}
    assert worker.drain().status == "idle"


def test_no_thread_until_the_first_task():
    before = {t.name for t in threading.enumerate()}
    worker = SessionWorker()
    assert not any(t.name == worker.name for t in threading.enumerate())
    assert worker.drain().status == "idle"
    # no thread started (threads of earlier tests may still be ending: compare new ones only)
    assert {t.name for t in threading.enumerate()} - before == set()


def test_a_failing_task_does_not_stop_the_worker(caplog):
    worker = SessionWorker()
    out: list[int] = []
    worker.submit("boom", lambda: 1 / 0)
    worker.submit("after", lambda: out.append(1))
    assert worker.flush(2)
    assert out == [1] and worker.failed == 1
    assert "boom" in caplog.text
    worker.drain()


def test_drain_runs_queued_writes_and_drops_queued_prefetch():
    worker = SessionWorker(drain_timeout=5)
    gate = threading.Event()
    ran: list[str] = []
    worker.submit("slow sync", lambda: (gate.wait(2), ran.append("sync")))
    worker.submit("queue_prefetch", lambda: ran.append("prefetch"), kind="prefetch")
    worker.submit("switch", lambda: ran.append("switch"), kind="boundary")
    threading.Timer(0.1, gate.set).start()
    report = worker.drain()
    assert report.status == "drained"
    assert ran == ["sync", "switch"]
    assert report.skipped_prefetch == ["queue_prefetch"] and report.abandoned == []
    assert worker.submit("late", lambda: ran.append("late")) is False


def test_drain_is_bounded_and_names_what_was_abandoned(release, caplog):
    caplog.set_level(logging.ERROR, logger="hermes_core")
    worker = SessionWorker(drain_timeout=0.2)
    worker.submit("sync_turn turn 1", lambda: release.wait(10))
    worker.submit("sync_turn turn 2", lambda: None)
    start = time.perf_counter()
    report = worker.drain()
    assert time.perf_counter() - start < 5  # the task blocks 10 s: the bound cut the drain
    assert report.status == "timed_out"
    assert report.abandoned == ["sync_turn turn 1", "sync_turn turn 2"]
    assert "sync_turn turn 2" in caplog.text and "memory.worker_drain_timeout" in caplog.text


def test_flush_times_out_on_a_hung_task(release):
    worker = SessionWorker(drain_timeout=0.05)
    worker.submit("hung", lambda: release.wait(10))
    assert worker.flush(0.05) is False
    assert worker.pending() == ["hung"]
    worker.drain()


def test_drain_all_shares_one_deadline(release):
    workers = [SessionWorker(drain_timeout=2.0) for _ in range(3)]
    for w in workers:
        w.submit("hung", lambda: release.wait(10))
    start = time.perf_counter()
    reports = drain_all()
    assert time.perf_counter() - start < 5  # one shared 2 s bound, not 3 x 2 s
    assert len([r for r in reports if r.status == "timed_out"]) >= 3


EXIT_SCRIPT = """
import sys, threading, time
from pathlib import Path
from hermes_core.worker import SessionWorker
out = Path(sys.argv[1])
w = SessionWorker(drain_timeout=float(sys.argv[2]))
w.submit("write", lambda: (time.sleep(0.3), out.write_text("stored")))
if sys.argv[3] == "hang":
    w.submit("hung", lambda: threading.Event().wait(60))
# no drain: the interpreter exits with work queued
"""


def _run_exit_script(tmp_path: Path, bound: str, mode: str) -> tuple[float, str, Path]:
    out = tmp_path / "out.txt"
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent(EXIT_SCRIPT))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), str(out), bound, mode],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return time.perf_counter() - start, proc.stderr, out


def test_interpreter_exit_drains_queued_writes(tmp_path):
    _elapsed, _stderr, out = _run_exit_script(tmp_path, "5", "ok")
    assert out.read_text() == "stored"


def test_interpreter_exit_is_bounded_with_a_hung_task(tmp_path):
    elapsed, stderr, out = _run_exit_script(tmp_path, "0.8", "hang")
    assert out.read_text() == "stored"  # the write ahead of the hung task still ran
    assert "hung" in stderr and "shutdown bound" in stderr
    assert elapsed < 10
