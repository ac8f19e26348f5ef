"""Queued hook calls (host.hooks.later) and a conversation's Backlog: order, drain, exit."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from agent_support import make_host

from hermes_core import MemoryProvider, Message, Session, hookimpl
from hermes_core._backlog import Backlog, drain_all

SESSION = Session(id="s1")
TESTS = Path(__file__).parent


@pytest.fixture
def release():
    event = threading.Event()
    yield event
    event.set()


def _sync(host, backlog, text, session=SESSION):
    user, answer = Message("user", text), Message("assistant", f"re {text}")
    host.hooks.later.sync_turn(user_message=user, assistant_message=answer, session=session,
                               messages=[user, answer], backlog=backlog)


def _until(check, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the state was not reached in time"
        time.sleep(0.005)


def _provider(name, seen, gate=None):
    class Provider(MemoryProvider):
        @hookimpl
        def sync_turn(self, user_message):
            if gate is not None:
                gate.wait(10)
            seen.append((name, user_message.content, threading.current_thread().name))

        @hookimpl
        def queue_prefetch(self, query):
            seen.append((name, f"prefetch {query}", threading.current_thread().name))

        @hookimpl
        def on_session_switch(self, new_session):
            seen.append((name, f"switch {new_session.id}", threading.current_thread().name))

    Provider.name = name
    return Provider


def test_calls_are_queued_and_run_in_order_on_each_plugins_lane(home, release):
    seen: list[tuple[str, str, str]] = []
    host = make_host(home, providers=[_provider("a", seen, release), _provider("b", seen)])
    backlog = Backlog("conversation-1", drain_timeout=5)
    start = time.perf_counter()
    for i in range(20):
        _sync(host, backlog, f"t{i}")
        host.hooks.later.queue_prefetch(query=f"q{i}", session=SESSION, backlog=backlog)
    assert time.perf_counter() - start < 5  # a's sync blocks 10 s: the caller never waited
    assert backlog.flush(0.05) is False  # a is held
    release.set()
    assert backlog.flush(5)
    for name in ("a", "b"):
        mine = [event for who, event, _thread in seen if who == name]
        assert mine == [e for i in range(20) for e in (f"t{i}", f"prefetch q{i}")]
        threads = {thread for who, _event, thread in seen if who == name}
        assert threading.current_thread().name not in threads  # never on the caller's thread
    assert backlog.completed == 40
    assert backlog.drain().status == "idle"
    host.shutdown()


def test_a_call_queued_behind_a_pending_one_on_the_same_lanes_costs_no_more_hand_off(home,
                                                                                      release):
    seen: list[tuple[str, str, str]] = []
    names = [f"p{i}" for i in range(10)]
    # pluggy calls the last registered first: its gate holds the runner until both are queued
    # deadlines far above the gate's hold: a part held past its deadline is rightly taken off the
    # runner (its lane gets a thread of its own), which a loaded machine must not trigger here
    host = make_host(home, providers=[_provider(n, seen, release if n == "p9" else None)
                                      for n in names],
                     config_text="hooks:\n  timeouts: {sync_turn: 120, queue_prefetch: 120}\n")
    runners = host.hooks.engine.lanes.runners
    backlog = Backlog("c", drain_timeout=5)
    before, threads = runners.submitted, {t.ident for t in threading.enumerate()}
    _sync(host, backlog, "t")
    host.hooks.later.queue_prefetch(query="q", session=SESSION, backlog=backlog)
    _sync(host, backlog, "t2")
    assert runners.submitted - before == 1  # one hand-off for the three calls
    release.set()
    assert backlog.flush(5)
    assert len({thread for _who, _event, thread in seen}) == 1  # all on that one runner
    assert not [t.name for t in threading.enumerate()  # no lane thread was started
                if t.ident not in threads and t.name.startswith("hermes-lane-background")]
    for name in names:
        assert [e for who, e, _t in seen if who == name] == ["t", "prefetch q", "t2"]
    assert backlog.completed == 3
    host.shutdown()


def test_one_calls_parts_split_between_the_pending_runner_and_a_new_one_run_side_by_side(
        home, release):
    seen: list[tuple[str, str, str]] = []
    a_prefetched = threading.Event()

    class Late(MemoryProvider):  # implements only queue_prefetch: its lane is not held
        name = "c"

        @hookimpl
        def queue_prefetch(self, query):
            # waits until "a" runs its part of the same call on the other runner
            seen.append(("c", f"prefetch {query} saw a: {a_prefetched.wait(10)}", ""))

    class A(MemoryProvider):
        name = "a"

        @hookimpl
        def sync_turn(self, user_message):
            release.wait(10)
            seen.append(("a", user_message.content, ""))

        @hookimpl
        def queue_prefetch(self, query):
            a_prefetched.set()
            seen.append(("a", f"prefetch {query}", ""))

    host = make_host(home, providers=[Late, _provider("b", seen), A])
    backlog = Backlog("c", drain_timeout=5)
    _sync(host, backlog, "t")  # a and b: one runner, held in a's sync_turn
    host.hooks.later.queue_prefetch(query="q", session=SESSION, backlog=backlog)
    release.set()
    assert backlog.flush(15)
    assert ("c", "prefetch q saw a: True", "") in seen
    assert [e for who, e, _t in seen if who == "a"] == ["t", "prefetch q"]
    host.shutdown()


def test_one_conversation_keeps_one_lane_across_its_sessions(home):
    seen: list[tuple[str, str, str]] = []
    host = make_host(home, providers=[_provider("a", seen)])
    backlog = Backlog("chain", drain_timeout=5)
    for i in range(10):  # every session id would pick another shard; the backlog's key holds
        session = Session(id=f"session-{i}")
        _sync(host, backlog, f"t{i}", session)
        host.hooks.later.on_session_switch(new_session=Session(id=f"next-{i}"), old_session=session,
                                           reason="compression", backlog=backlog)
    assert backlog.flush(5)
    assert [e for _w, e, _t in seen] == [e for i in range(10) for e in (f"t{i}", f"switch next-{i}")]
    threads = {t for _w, _e, t in seen}
    assert len(threads) == 1 and threads.pop().startswith("hermes-lane-background-memory-provider:a")
    host.shutdown()


def test_nothing_queued_and_no_thread_when_no_plugin_implements_the_hook(home):
    host = make_host(home)
    before = {t.ident for t in threading.enumerate()}
    backlog = Backlog("c")
    _sync(host, backlog, "x")
    assert backlog.completed == 0 and backlog.pending() == []
    assert {t.ident for t in threading.enumerate()} - before == set()
    assert backlog.drain().status == "idle"
    host.shutdown()


def test_a_failing_call_is_reported_and_the_next_one_still_runs(home, caplog):
    seen: list[str] = []

    class Flaky(MemoryProvider):
        name = "flaky"

        @hookimpl
        def sync_turn(self, user_message):
            if user_message.content == "boom":
                raise RuntimeError("disk full")
            seen.append(user_message.content)

    host = make_host(home, providers=[Flaky])
    problems = []
    host.hooks.subscribe(problems.append)
    backlog = Backlog("c")
    _sync(host, backlog, "boom")
    _sync(host, backlog, "after")
    assert backlog.flush(5)
    assert seen == ["after"]
    assert [(p.hook, p.plugin, p.status, p.session_id) for p in problems] == [
        ("sync_turn", "memory-provider:flaky", "error", "s1")]
    assert "disk full" in caplog.text
    host.shutdown()


def test_a_late_plugin_hands_the_rest_of_a_call_to_their_lanes_in_order(home, release):
    seen: list[tuple[str, str, str]] = []
    # pluggy calls the last registered first: "slow" runs first on the runner and hangs there
    host = make_host(home, providers=[_provider("fast", seen), _provider("slow", seen, release)],
                     config_text="hooks:\n  timeouts:\n    sync_turn: 0.2\n")
    backlog = Backlog("c", drain_timeout=5)
    for i in range(3):
        _sync(host, backlog, f"t{i}")
    assert backlog.flush(5)  # slow is late: fast's parts went to its lane, none waits on slow
    assert [e for who, e, _t in seen if who == "fast"] == ["t0", "t1", "t2"]
    release.set()
    host.hooks.drain(5)
    assert [e for who, e, _t in seen if who == "slow"] == ["t0", "t1", "t2"]
    host.shutdown()


def test_a_late_plugin_with_later_calls_joined_to_its_runner_sees_one_call_at_a_time(home,
                                                                                      release):
    seen: list[str] = []
    overlaps: list[str] = []
    active = threading.Semaphore(1)

    class Slow(MemoryProvider):
        name = "slow"

        @hookimpl
        def sync_turn(self, user_message):
            if not active.acquire(blocking=False):
                overlaps.append(user_message.content)
                return
            try:
                if user_message.content == "t0":
                    release.wait(10)
                seen.append(user_message.content)
            finally:
                active.release()

        @hookimpl
        def queue_prefetch(self, query):
            seen.append(f"prefetch {query}")

    fast: list[str] = []
    host = make_host(home, providers=[_provider("fast", fast), Slow],
                     config_text="hooks:\n  timeouts:\n    sync_turn: 0.2\n")
    backlog = Backlog("c", drain_timeout=5)
    for i in range(3):  # t1, t2 and the prefetches join the runner that hangs in slow's t0
        _sync(host, backlog, f"t{i}")
        host.hooks.later.queue_prefetch(query=f"q{i}", session=SESSION, backlog=backlog)
    assert backlog.flush(5)  # slow is late: fast's parts went to its lane
    assert [e for _w, e, _t in fast] == [e for i in range(3) for e in (f"t{i}", f"prefetch q{i}")]
    assert seen == []  # slow's later calls wait behind its hung one
    release.set()
    host.hooks.drain(5)
    assert overlaps == []
    assert seen == [e for i in range(3) for e in (f"t{i}", f"prefetch q{i}")]
    host.shutdown()


def test_a_wrapper_of_a_queued_call_still_sees_the_inner_results(home):
    seen: list[str] = []

    class Inner(MemoryProvider):
        name = "inner"

        @hookimpl
        def sync_turn(self, user_message):
            seen.append(f"inner {user_message.content}")

    class Around(MemoryProvider):
        name = "around"

        @hookimpl(wrapper=True)
        def sync_turn(self, user_message):
            seen.append("before")
            result = yield
            seen.append(f"after {len(result)}")
            return result

    host = make_host(home, providers=[Inner, Around])
    backlog = Backlog("c")
    _sync(host, backlog, "x")
    assert backlog.flush(5)
    assert seen == ["before", "inner x", "after 0"]  # sync_turn returns None: no values
    host.shutdown()


def test_drain_runs_queued_writes_and_drops_queued_prefetch(home, release):
    seen: list[tuple[str, str, str]] = []
    host = make_host(home, providers=[_provider("a", seen, release)])
    backlog = Backlog("c", drain_timeout=5)
    _sync(host, backlog, "slow sync")
    _until(lambda: backlog.pending() == ["sync_turn s1 turn 1"])
    host.hooks.later.queue_prefetch(query="q", session=SESSION, backlog=backlog)
    host.hooks.later.on_session_switch(new_session=Session(id="s2"), old_session=SESSION,
                                       reason="new", backlog=backlog)
    threading.Timer(0.1, release.set).start()
    report = backlog.drain()
    assert report.status == "drained"
    assert [e for _w, e, _t in seen] == ["slow sync", "switch s2"]
    assert report.skipped_prefetch == ["queue_prefetch s1"] and report.abandoned == []
    host.hooks.later.queue_prefetch(query="late", session=SESSION, backlog=backlog)
    assert backlog.pending() == []  # closed: not queued
    host.shutdown()


def test_drain_is_bounded_and_names_what_was_abandoned(home, release, caplog):
    caplog.set_level(logging.ERROR, logger="hermes_core")
    seen: list[tuple[str, str, str]] = []
    host = make_host(home, providers=[_provider("a", seen, release)])
    backlog = Backlog("c", drain_timeout=0.2)
    _sync(host, backlog, "one")
    user = Message("user", "one")
    host.hooks.later.sync_turn(user_message=Message("user", "two"), assistant_message=user,
                               session=SESSION, messages=[user, user], backlog=backlog)
    start = time.perf_counter()
    report = backlog.drain()
    assert time.perf_counter() - start < 5  # the call blocks 10 s: the bound cut the drain
    assert report.status == "timed_out"
    assert report.abandoned == ["sync_turn s1 turn 1", "sync_turn s1 turn 2"]
    assert "sync_turn s1 turn 2" in caplog.text and "memory.worker_drain_timeout" in caplog.text
    release.set()
    _until(lambda: len(seen) == 1)  # the hung call finishes; the abandoned one never runs
    host.hooks.drain(5)
    assert [e for _w, e, _t in seen] == ["one"]
    host.shutdown()


def test_drain_all_shares_one_deadline(home, release):
    host = make_host(home, providers=[_provider("a", [], release)])
    backlogs = [Backlog(f"c{i}", drain_timeout=2.0) for i in range(3)]
    for i, backlog in enumerate(backlogs):
        _sync(host, backlog, "hung", Session(id=f"s{i}"))
    start = time.perf_counter()
    reports = drain_all(2.0)
    assert time.perf_counter() - start < 5  # one shared 2 s bound, not 3 x 2 s
    assert len([r for r in reports if r.status == "timed_out"]) >= 1
    release.set()
    host.shutdown()


EXIT_SCRIPT = """
import sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from agent_support import make_host
from hermes_core import MemoryProvider, Message, Session, hookimpl
from hermes_core._backlog import Backlog
out = Path(sys.argv[1])

class Writer(MemoryProvider):
    name = "writer"

    @hookimpl
    def sync_turn(self, user_message):
        if user_message.content == "hang":
            threading.Event().wait(60)
        time.sleep(0.3)
        out.write_text("stored")

host = make_host(Path(sys.argv[5]), providers=[Writer])
backlog = Backlog("c", drain_timeout=float(sys.argv[2]))
for text in ["write", "hang"] if sys.argv[3] == "hang" else ["write"]:
    m = Message("user", text)
    host.hooks.later.sync_turn(user_message=m, assistant_message=m, session=Session(id="s"),
                               messages=[m], backlog=backlog)
# no drain: the interpreter exits with work queued
"""


def _run_exit_script(tmp_path: Path, bound: str, mode: str) -> tuple[float, str, Path]:
    out = tmp_path / "out.txt"
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent(EXIT_SCRIPT))
    home = tmp_path / "home"
    home.mkdir()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(script), str(out), bound, mode, str(TESTS),
                           str(home)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return time.perf_counter() - start, proc.stderr, out


def test_interpreter_exit_drains_queued_writes(tmp_path):
    _elapsed, _stderr, out = _run_exit_script(tmp_path, "5", "ok")
    assert out.read_text() == "stored"


def test_interpreter_exit_is_bounded_with_a_hung_call(tmp_path):
    elapsed, stderr, out = _run_exit_script(tmp_path, "0.8", "hang")
    assert out.read_text() == "stored"  # the write ahead of the hung call still ran
    assert "sync_turn s turn 1" in stderr and "shutdown bound" in stderr
    assert elapsed < 10
