"""PluginContext.run_later: a plugin's own work on its background lane, drained at shutdown; and
disposable work (``kind="disposable"``) on a lane of its own, which shutdown does not wait for."""

from __future__ import annotations

import logging
import threading
import time
import types
from pathlib import Path

import pytest
from agent_support import ScriptLLM, reply
from agent_support import make_host as make_agent_host

from hermes_core import hookimpl
from hermes_core._lanes import shard_of
from hermes_core.agent import Agent
from hermes_core.kinds import MemoryProvider, PluginContext
from hermes_core.testing import make_host
from hermes_core.types import Session


class Keeper(MemoryProvider):
    name = "keeper"


def keeper_host(home: Path, plugin_name: str = "keeper"):  # type: ignore[no-untyped-def]
    def register(register):  # type: ignore[no-untyped-def]
        register(Keeper)

    plugin = types.SimpleNamespace(register_memory_providers=hookimpl(
        specname="register_memory_providers")(register))
    host = make_host(home, plugins=[(plugin_name, plugin)], builtins=False,
                     config="memory:\n  providers: [keeper]\n  worker_drain_timeout: 5\n")
    instance = host.activate("memory-provider", "keeper", config_key="keeper")
    return host, instance


def test_run_later_runs_on_the_instances_lane_in_order_and_shutdown_drains_it(
        hermes_home: Path) -> None:
    host, keeper = keeper_host(hermes_home)
    gate = threading.Event()
    ran: list[tuple[int, str]] = []

    def job(n: int) -> None:
        gate.wait(10)
        ran.append((n, threading.current_thread().name))

    for n in range(3):
        assert keeper.context.run_later(lambda n=n: job(n), f"job {n}") is True
    assert ran == [], "run_later returns before the job runs"
    gate.set()
    host.shutdown()  # drains the lane before the instances' shutdown
    assert [n for n, _ in ran] == [0, 1, 2]
    assert {name for _, name in ran} == {"hermes-lane-background-memory-provider:keeper"}
    assert keeper.context.run_later(lambda: ran.append((9, "late")), "late") is False
    assert len(ran) == 3


def test_a_raising_job_is_logged_and_the_lane_goes_on(hermes_home: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    host, keeper = keeper_host(hermes_home)
    done = threading.Event()
    keeper.context.run_later(lambda: 1 / 0, "broken job")
    keeper.context.run_later(done.set, "next job")
    assert done.wait(10)
    host.shutdown()
    assert "broken job raised ZeroDivisionError" in caplog.text


def test_a_context_built_by_hand_runs_the_job_at_once(hermes_home: Path) -> None:
    from hermes_core.config import CoreConfig

    ran: list[int] = []
    context = PluginContext(plugin_name="x", home=hermes_home, config=CoreConfig(),
                            logger=__import__("logging").getLogger("x"))
    assert context.run_later(lambda: ran.append(1), "now") is True and ran == [1]


# ------------------------------------------------------------------------ kind="disposable"


def _lane_threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_a_hung_disposable_job_holds_no_write_is_never_late_and_does_not_delay_close(
        home: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A recall prepared after each turn that hangs (a server that never answers): the turns'
    writes still run, nothing is reported late, closing does not wait for it, and the jobs
    queued behind it are dropped."""
    release = threading.Event()
    started: list[str] = []
    synced: list[str] = []

    class Recaller(MemoryProvider):
        name = "recaller"

        @hookimpl
        def sync_turn(self, user_message):  # type: ignore[no-untyped-def]
            synced.append(user_message.content)

        @hookimpl
        def queue_prefetch(self, query, session):  # type: ignore[no-untyped-def]
            def recall() -> None:
                started.append(query)
                release.wait(30)

            assert self.context.run_later(recall, f"recall {query}", kind="disposable",
                                          session=session)

    host = make_agent_host(home, providers=[Recaller], config_text=(
        "hooks:\n  timeouts: {queue_prefetch: 0.5, sync_turn: 0.5}\n"))
    host.config.core.memory.worker_drain_timeout = 5
    agent = Agent(host, ScriptLLM([reply(f"r{i}") for i in range(3)]))
    caplog.set_level(logging.INFO, logger="hermes_core")
    try:
        for i in range(3):
            agent.run_turn(f"t{i}")
        assert agent.worker.flush(5)  # every turn's sync_turn ran, none behind the hung recall
        assert synced == ["t0", "t1", "t2"]
        deadline = time.monotonic() + 10
        while not started:  # the first turn's recall is on its lane now, and hangs there
            assert time.monotonic() < deadline, "the disposable job never started"
            time.sleep(0.01)
        assert started == ["t0"], "one conversation's jobs run one at a time, in order"
        assert list(host.hooks.engine.problems) == [], "nothing is late, nothing failed"
        start = time.perf_counter()
        report = agent.close()
        closing = time.perf_counter() - start
        assert closing < 2.5, closing  # the drain bound is 5 s: it waited for none of it
        assert report.abandoned == [] and report.status != "timed_out"
    finally:
        release.set()
    for thread in _lane_threads("hermes-lane-disposable-memory-provider:recaller"):
        thread.join(5)  # the hung job ends; the lane's thread skips what was queued and stops
    assert started == ["t0"], "the queued jobs were dropped at the drain"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert "2 queued call(s) dropped, 1 running call(s) abandoned" in caplog.text
    assert "recall t0" in caplog.text


def test_disposable_work_runs_on_its_conversations_own_lane_beside_the_writes(
        hermes_home: Path) -> None:
    host, keeper = keeper_host(hermes_home)
    hold = threading.Event()
    ran: list[tuple[str, str]] = []
    wrote = threading.Event()
    session = Session(id="conversation-a")

    def note(what: str) -> None:
        ran.append((what, threading.current_thread().name))

    try:
        assert keeper.context.run_later(lambda: (hold.wait(30), note("recall")), "recall",
                                        kind="disposable", session=session)
        assert keeper.context.run_later(lambda: (note("write"), wrote.set()), "write",
                                        session=session)
        assert wrote.wait(10), "a write never waits behind disposable work"
        shard = shard_of(session.id)
        suffix = f"-{shard}" if shard else ""
        assert ran == [("write", f"hermes-lane-background-memory-provider:keeper{suffix}")]
        hold.set()
        deadline = time.monotonic() + 10
        while len(ran) < 2:
            assert time.monotonic() < deadline, ran
            time.sleep(0.01)
        assert ran[1] == ("recall", f"hermes-lane-disposable-memory-provider:keeper{suffix}")
    finally:
        hold.set()
        host.shutdown()


def test_a_disposable_job_that_raises_is_logged_once_with_its_plugin(
        hermes_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    host, keeper = keeper_host(hermes_home, plugin_name="keeper-plugin")
    done = threading.Event()
    assert keeper.context.run_later(lambda: 1 / 0, "broken recall", kind="disposable") is True
    keeper.context.run_later(done.set, "next recall", kind="disposable")
    assert done.wait(10), "the lane goes on after a job raised"
    host.shutdown()
    mentions = [r for r in caplog.records if "broken recall" in r.getMessage()]
    assert len(mentions) == 1 and mentions[0].levelno == logging.ERROR
    assert "plugin 'keeper-plugin'" in mentions[0].getMessage()
    assert "raised ZeroDivisionError" in mentions[0].getMessage()
    assert keeper.context.run_later(done.set, "after", kind="disposable") is False


def test_run_later_refuses_an_unknown_kind(hermes_home: Path) -> None:
    host, keeper = keeper_host(hermes_home)
    with pytest.raises(ValueError, match="kind must be 'write' or 'disposable'"):
        keeper.context.run_later(lambda: None, "x", kind="later")  # type: ignore[arg-type]
    host.shutdown()


def test_a_context_built_by_hand_runs_disposable_work_at_once(hermes_home: Path) -> None:
    from hermes_core.config import CoreConfig

    ran: list[int] = []
    context = PluginContext(plugin_name="x", home=hermes_home, config=CoreConfig(),
                            logger=logging.getLogger("x"))
    assert context.run_later(lambda: ran.append(1), "now", kind="disposable",
                             session=Session(id="s")) is True
    assert ran == [1]


def test_behind_a_hung_disposable_job_only_the_newest_waiting_jobs_are_kept(
        hermes_home: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A plugin that keeps queueing recalls behind its own hung one holds a bounded queue: each
    job beyond DISPOSABLE_QUEUE drops the oldest waiting one (logged), and once the hung job ends
    the newest run, in order."""
    from hermes_core._lanes import DISPOSABLE_QUEUE

    host, keeper = keeper_host(hermes_home)
    hold, started = threading.Event(), threading.Event()
    ran: list[int] = []
    caplog.set_level(logging.INFO, logger="hermes_core")
    try:
        assert keeper.context.run_later(lambda: (started.set(), hold.wait(30)), "hung recall",
                                        kind="disposable")
        assert started.wait(10)
        extra = 3 * DISPOSABLE_QUEUE
        for i in range(extra):
            assert keeper.context.run_later(lambda i=i: ran.append(i), f"recall {i}",
                                            kind="disposable")
        lane = host.hooks.engine.lanes.get("memory-provider:keeper", "disposable", 0)
        assert lane.backlog == DISPOSABLE_QUEUE + 1  # the hung job and the newest waiting
        hold.set()
        assert lane.wait_idle(10)
        assert ran == list(range(extra - DISPOSABLE_QUEUE, extra))
        drops = [r.getMessage() for r in caplog.records if "dropped before it ran" in r.getMessage()]
        assert len(drops) == extra - DISPOSABLE_QUEUE
        assert "recall 0 dropped before it ran" in drops[0] and "hung recall" in drops[0]
    finally:
        hold.set()
        host.shutdown()
