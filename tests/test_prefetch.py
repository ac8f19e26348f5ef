"""The prefetch deadline runner (hermes_core.prefetch) with real hosts and throwaway providers."""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
import traceback

import pytest
from agent_support import make_host

from hermes_core import MemoryProvider, Session, hookimpl
from hermes_core.prefetch import PrefetchRunner

SESSION = Session(id="s1")


class Fast(MemoryProvider):
    name = "fast"

    @hookimpl
    def prefetch(self, query, session):
        return f"fast knows {query}"


class Quiet(MemoryProvider):
    name = "quiet"

    @hookimpl
    def prefetch(self, query):
        return None


@pytest.fixture
def release():
    """An event the blocking providers wait on; set at teardown so no thread outlives the test."""
    event = threading.Event()
    yield event
    event.set()


def test_every_provider_answers_in_activation_order(home):
    host = make_host(home, providers=[Quiet, Fast])
    runner = PrefetchRunner(host, timeout=30.0)  # an upper bound only: both answer at once
    results = runner.run("tea", SESSION)
    assert [(r.provider, r.status, r.text) for r in results] == [
        ("quiet", "fresh", ""),
        ("fast", "fresh", "fast knows tea"),
    ]
    assert all(r.seconds is not None and r.seconds < 30.0 for r in results)
    runner.close()


def test_no_providers_means_no_threads(home):
    host = make_host(home)
    before = {t.ident for t in threading.enumerate()}
    assert PrefetchRunner(host, timeout=0.3).run("x", SESSION) == []
    # no thread started (a thread of an earlier test may end meanwhile: compare new ones only)
    assert {t.ident for t in threading.enumerate()} - before == set()


def current_frames() -> list:
    """Every thread's frame. CPython 3.11's ``sys._current_frames()`` can deadlock when a garbage
    collection starts inside it (it holds the interpreter's thread-list lock while building its
    dict, and a finalizer then waits for that lock: a fresh-clone CI run hung here, the main
    thread inside ``gc_collect_main``); 3.12 turns collection off around it, and so does this."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return list(sys._current_frames().values())
    finally:
        if enabled:
            gc.enable()


def test_a_hung_provider_costs_at_most_the_deadline_and_gets_one_call(home, release):
    calls = []

    class Hung(MemoryProvider):
        name = "hung"

        @hookimpl
        def prefetch(self, query):
            calls.append(query)
            release.wait(10)
            return "too late"

    host = make_host(home, providers=[Hung, Fast])
    runner = PrefetchRunner(host, timeout=1.0)  # room for Fast on a loaded machine
    for turn in range(3):
        start = time.perf_counter()
        results = runner.run(f"q{turn}", SESSION)
        elapsed = time.perf_counter() - start
        # the hung call blocks for 10 s: returning well before proves the deadline cut it short
        # (a bound with room for a loaded machine, not a speed target: bench/ measures that)
        assert elapsed < 5, f"turn {turn} took {elapsed:.3f}s"
        assert [(r.provider, r.status, r.text) for r in results] == [
            ("hung", "stale", ""),
            ("fast", "fresh", f"fast knows q{turn}"),
        ]
    assert calls == ["q0"]  # never a second outstanding call on the hung provider
    # one thread stuck in the hung provider, never one per turn (it may be the runner that
    # started the turn's providers, or the provider's own lane)
    stuck = [frame for frame in current_frames()
             if any(f.f_code is Hung.prefetch.__code__ for f, _ in traceback.walk_stack(frame))]
    assert len(stuck) == 1
    runner.close()


def test_a_late_answer_serves_the_next_turn(home, release):
    gate = threading.Event()
    answered = threading.Event()

    class Slow(MemoryProvider):
        name = "slow"
        n = 0

        @hookimpl
        def prefetch(self, query):
            Slow.n += 1
            if Slow.n == 2:
                gate.wait(5)  # the second call is late
                answered.set()
                return "second answer"
            if Slow.n == 3:
                release.wait(10)  # the third hangs
            return f"answer {Slow.n}"

    host = make_host(home, providers=[Slow])
    runner = PrefetchRunner(host, timeout=1.0)  # room for the first answer on a loaded machine
    assert runner.run("a", SESSION)[0].text == "answer 1"
    late = runner.run("b", SESSION)[0]
    assert (late.status, late.text) == ("stale", "answer 1")  # the last answer it gave
    gate.set()
    assert answered.wait(5)
    # the lane keeps the late answer once the call is over: wait for that state, bounded
    bound = time.monotonic() + 5
    while runner._lanes["memory-provider:slow"].busy and time.monotonic() < bound:
        time.sleep(0.005)  # poll interval while waiting on the state above
    assert not runner._lanes["memory-provider:slow"].busy
    hung = runner.run("c", SESSION)[0]
    assert (hung.status, hung.text) == ("stale", "second answer")  # the late answer was kept
    runner.forget()
    assert runner.run("d", SESSION)[0].text == ""  # still hung, and forgotten
    runner.close()


def test_an_answer_for_one_message_only_is_never_served_at_another_turn(home, release):
    """``reuse_prefetch = False`` (a Hermes ``pre_llm_call`` context belongs to its one user
    message): an answer that comes after the deadline is dropped, not served at the next turn,
    and a turn the provider misses gets nothing from it."""
    gate = threading.Event()
    answered = threading.Event()

    class OneShot(MemoryProvider):
        name = "one_shot"
        reuse_prefetch = False
        n = 0

        @hookimpl
        def prefetch(self, query):
            OneShot.n += 1
            if OneShot.n == 2:
                gate.wait(5)  # the second call is late
                answered.set()
            elif OneShot.n == 3:
                release.wait(10)  # the third hangs
            return f"for {query}"

    host = make_host(home, providers=[OneShot])
    runner = PrefetchRunner(host, timeout=1.0)  # room for the first answer on a loaded machine
    assert runner.run("a", SESSION)[0].text == "for a"  # in time: its own turn's answer
    late = runner.run("b", SESSION)[0]
    assert (late.status, late.text) == ("stale", "")  # not turn a's answer
    gate.set()
    assert answered.wait(5)
    bound = time.monotonic() + 5
    while runner._lanes["memory-provider:one_shot"].busy and time.monotonic() < bound:
        time.sleep(0.005)  # poll interval while waiting for the late call to end
    assert not runner._lanes["memory-provider:one_shot"].busy
    hung = runner.run("c", SESSION)[0]
    assert (hung.status, hung.text) == ("stale", "")  # turn b's late answer was dropped
    runner.close()


def test_a_provider_that_raises_contributes_nothing_and_is_logged(home, caplog):
    caplog.set_level(logging.ERROR, logger="hermes_core")

    class Broken(MemoryProvider):
        name = "broken"

        @hookimpl
        def prefetch(self, query):
            raise RuntimeError("index corrupt")

    class Weird(MemoryProvider):
        name = "weird"

        @hookimpl
        def prefetch(self, query):
            return {"not": "text"}

    host = make_host(home, providers=[Broken, Weird, Fast])
    results = PrefetchRunner(host, timeout=1.0).run("x", SESSION)
    assert [(r.provider, r.status, r.text) for r in results] == [
        ("broken", "error", ""),
        ("weird", "error", ""),  # a dict is the wrong type: recorded, contributes nothing
        ("fast", "fresh", "fast knows x"),
    ]
    assert "index corrupt" in (results[0].error or "")
    assert "memory-provider:broken" in caplog.text and "prefetch" in caplog.text
    assert "memory-provider:weird" in caplog.text and "dict" in caplog.text


def test_timeout_must_be_positive(home):
    with pytest.raises(ValueError, match="positive"):
        PrefetchRunner(make_host(home), timeout=0)


def test_a_hung_prefetch_is_logged_and_reported_as_every_late_hook_is(home, release, caplog):
    """Issue 33 N8: a hung prefetch was bounded but silent, unlike every other late hook."""

    class Hung(MemoryProvider):
        name = "hung"

        @hookimpl
        def prefetch(self, query):
            release.wait(10)

        @hookimpl
        def system_prompt_block(self):
            release.wait(10)  # another hook, late the kernel's usual way

    host = make_host(home, providers=[Hung, Fast],
                     config_text="hooks:\n  timeouts:\n    system_prompt_block: 0.5\n")
    runner = PrefetchRunner(host, timeout=0.5)
    before = host.hooks.problem_count
    with caplog.at_level(logging.WARNING, logger="hermes_core.hooks"):
        runner.run("first", SESSION)  # called, and late
        runner.run("second", SESSION)  # still busy: not called again
        host.hooks.system_prompt_block(session=SESSION)
    runner.close()
    problems = list(host.hooks.problems)[-3:]
    assert host.hooks.problem_count == before + 3
    assert [(p.hook, p.plugin, p.status) for p in problems] == [
        ("prefetch", "memory-provider:hung", "timed_out"),
        ("prefetch", "memory-provider:hung", "queued"),
        ("system_prompt_block", "memory-provider:hung", "timed_out"),
    ]
    assert problems[0].session_id == SESSION.id
    late_prefetch, _queued, late_block = (p.message for p in problems)
    assert late_prefetch == (
        "plugin memory-provider:hung did not answer hook prefetch within its deadline (0.5 s; "
        "raise memory.prefetch_timeout if it needs longer); the caller went on without it, and "
        "the call still runs")
    # the same sentence as any other hook's, but for the hook and the setting to raise
    assert late_block == late_prefetch.replace("hook prefetch", "hook system_prompt_block").replace(
        "memory.prefetch_timeout", "hooks.timeouts.system_prompt_block")
    logged = [r for r in caplog.records if r.name == "hermes_core.hooks"]
    assert [r.getMessage() for r in logged][-3:] == [p.message for p in problems]
    assert {r.levelno for r in logged[-3:]} == {logging.WARNING}
