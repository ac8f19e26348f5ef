"""hermes_core.storage.spool: durable appends, ordered at-least-once delivery, kill -9, the bound.

Real files and real processes throughout: writers are killed with SIGKILL mid-append, another
process holds the consumer lock, a Python without ``fcntl`` imports and uses the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hermes_core.storage.spool import Spool, SpoolFullError


class Down(Exception):
    pass


class Refused(Exception):
    pass


def ns(spool: Spool) -> list[int]:
    return [e.record["n"] for e in spool.pending()]


def test_records_come_back_in_order_and_leave_only_when_acknowledged(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    assert not spool.has_pending() and spool.pending() == []
    spool.append({"n": 1}, {"n": 2})
    spool.append({"n": 3})
    assert spool.has_pending() and ns(spool) == [1, 2, 3] and len(spool) == 3
    assert (spool.path.stat().st_mode & 0o777) == 0o600
    with spool.consuming() as entries:
        spool.ack(entries[:2])
    assert ns(spool) == [3]
    spool.ack(spool.pending())
    assert not spool.path.exists() and not spool.has_pending()


def test_identical_records_are_acknowledged_one_line_each(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1}, {"n": 1}, {"n": 2})
    first = spool.pending()[0]
    spool.ack([first])
    assert ns(spool) == [1, 2]


def test_deliver_sends_in_order_and_stops_at_a_failure_keeping_the_rest(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append(*({"n": n} for n in range(1, 5)))
    got: list[int] = []

    def send(record: dict) -> None:  # type: ignore[type-arg]
        if record["n"] == 3:
            raise Down("server down")
        got.append(record["n"])

    report = spool.deliver(send, attempts=2, pause=lambda attempt, exc: 0.0)
    assert got == [1, 2] and report.sent == 2 and report.left == 2
    assert isinstance(report.error, Down) and ns(spool) == [3, 4]
    spool.append({"n": 5})
    report = spool.deliver(lambda r: got.append(r["n"]))
    assert got == [1, 2, 3, 4, 5] and report.sent == 3 and not spool.path.exists()


def test_refused_records_are_set_aside_with_the_reason(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    rejected = Spool(tmp_path / "rejected.jsonl")
    spool.append({"n": 1}, {"n": 2})
    calls: list[int] = []

    def send(record: dict) -> None:  # type: ignore[type-arg]
        calls.append(record["n"])
        if record["n"] == 1:
            raise Refused("422: too long")

    report = spool.deliver(send, refused=lambda exc: isinstance(exc, Refused), rejected=rejected,
                           attempts=3)
    assert calls == [1, 2], "a refused record is not retried"
    assert report.sent == 1 and report.rejected == 1 and not spool.path.exists()
    kept = rejected.pending()[0].record
    assert kept["n"] == 1 and "422" in kept["rejected"] and kept["rejected_at"] > 0


def test_a_retry_pause_ends_when_stop_is_set(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1})
    stop = threading.Event()
    stop.set()
    start = time.perf_counter()
    report = spool.deliver(lambda r: (_ for _ in ()).throw(Down("x")), attempts=5,
                           pause=lambda attempt, exc: 30.0, stop=stop)
    assert time.perf_counter() - start < 5 and isinstance(report.error, Down)
    assert ns(spool) == [1]


def test_a_torn_last_line_is_never_read_and_never_swallows_the_next(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1})
    with open(spool.path, "ab") as fh:
        fh.write(b'{"n": 2, "tr')  # a crash mid-write
    assert ns(spool) == [1]
    spool.append({"n": 3})
    assert ns(spool) == [1, 3]
    with caplog.at_level("ERROR"):
        spool.ack(spool.pending())
    assert not spool.path.exists()
    assert b'{"n": 2, "tr' in spool.path.with_name("s.jsonl.unreadable").read_bytes()
    assert "unreadable" in caplog.text


def test_the_unreadable_file_is_private_like_the_spool(tmp_path: Path) -> None:
    """Before: ``<spool>.unreadable`` (conversation text cut short by a crash) was created with
    the umask's mode (0644 under the usual 022), readable by every local user, while the spool
    and everything else it writes are 0600."""
    old = os.umask(0o022)
    try:
        spool = Spool(tmp_path / "s.jsonl")
        spool.append({"n": 1})
        with open(spool.path, "ab") as fh:
            fh.write(b'{"n": 2, "a private tr')
        spool.append({"n": 3})
        spool.ack(spool.pending())
    finally:
        os.umask(old)
    assert (spool.path.with_name("s.jsonl.unreadable").stat().st_mode & 0o777) == 0o600


def test_the_bound_is_a_clear_error_and_keeps_what_is_there(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl", max_bytes=200)
    spool.append({"n": 1, "text": "x" * 50})
    before = spool.path.read_bytes()
    with pytest.raises(SpoolFullError) as info:
        spool.append({"n": 2, "text": "y" * 200})
    assert str(spool.path) in str(info.value) and "may hold 200" in str(info.value)
    assert isinstance(info.value, OSError) and spool.path.read_bytes() == before


def test_a_second_consumer_waits_for_the_first(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    spool.append({"n": 1})
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time\nfrom pathlib import Path\n"
            "from hermes_core.storage.spool import Spool\n"
            "s = Spool(Path(sys.argv[1]))\n"
            "with s.consuming() as entries:\n"
            "    print(len(entries), flush=True)\n"
            "    sys.stdin.readline()\n"
            "    s.ack(entries)\n"), str(spool.path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "1"  # the other process consumes now
        spool.append({"n": 2})  # appending never waits for a consumer
        got: list[int] = []
        waiter = threading.Thread(target=lambda: spool.deliver(lambda r: got.append(r["n"])))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive() and got == [], "a second consumer must wait"
        holder.stdin.write("\n")
        holder.stdin.flush()
        waiter.join(30)
        assert got == [2], "record 1 was the other consumer's; 2 came after it"
    finally:
        holder.kill()
        holder.wait()
    assert not spool.path.exists()


WRITER = """
import sys
from pathlib import Path
from hermes_core.storage.spool import Spool
spool = Spool(Path(sys.argv[1]))
tag = sys.argv[2]
for n in range(100000):
    spool.append({"w": tag, "n": n, "pad": "p" * (n % 700)})
    print(n, flush=True)
"""


def test_kill_9_mid_append_loses_and_tears_nothing(tmp_path: Path) -> None:
    """Two writers killed with SIGKILL while appending: every append that returned is there, in
    order, once; no line is torn into a record; the spool stays usable."""
    path = tmp_path / "s.jsonl"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag],
                              stdout=subprocess.PIPE, text=True) for tag in "ab"]
    returned: dict[str, int] = {}
    for proc in procs:
        assert proc.stdout is not None
        for _ in range(150):  # let it get going
            proc.stdout.readline()
    for proc in procs:
        os.kill(proc.pid, signal.SIGKILL)
    for tag, proc in zip("ab", procs, strict=True):
        assert proc.stdout is not None
        lines = [line for line in proc.stdout.read().splitlines() if line.strip()]
        returned[tag] = int(lines[-1]) if lines else 149
        proc.wait()
    spool = Spool(path)
    records = [e.record for e in spool.pending()]
    for tag in "ab":
        got = [r["n"] for r in records if r["w"] == tag]
        assert got[: returned[tag] + 1] == list(range(returned[tag] + 1)), "lost or reordered"
        assert len(got) == len(set(got)), "duplicated"
        assert all(r["pad"] == "p" * (r["n"] % 700) for r in records if r["w"] == tag)
    spool.append({"w": "c", "n": 0, "pad": ""})
    assert spool.pending()[-1].record["w"] == "c"


def test_a_consumer_killed_before_acknowledging_delivers_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    Spool(path).append({"n": 1}, {"n": 2})
    code = ("import os, signal, sys\nfrom pathlib import Path\n"
            "from hermes_core.storage.spool import Spool\n"
            "def send(r):\n"
            "    print(r['n'], flush=True)\n"
            "    if r['n'] == 2: os.kill(os.getpid(), signal.SIGKILL)\n"
            "Spool(Path(sys.argv[1])).deliver(send)\n")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL and done.stdout.split() == ["1", "2"]
    got: list[int] = []
    Spool(path).deliver(lambda r: got.append(r["n"]))
    assert got == [1, 2], "unacknowledged records are delivered again (at least once)"


def test_the_module_works_without_fcntl(tmp_path: Path) -> None:
    code = ("import sys\nsys.modules['fcntl'] = None  # as on Windows\n"
            "from pathlib import Path\nfrom hermes_core.storage.spool import Spool\n"
            "s = Spool(Path(sys.argv[1]))\ns.append({'n': 1}, {'n': 2})\n"
            "got = []\ns.deliver(lambda r: got.append(r['n']))\nprint(got)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s.jsonl")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [1, 2]
