"""PluginContext.run_later: a plugin's own work on its background lane, drained at shutdown."""

from __future__ import annotations

import threading
import types
from pathlib import Path

from hermes_core import hookimpl
from hermes_core.kinds import MemoryProvider, PluginContext
from hermes_core.testing import make_host


class Keeper(MemoryProvider):
    name = "keeper"


def keeper_host(home: Path):  # type: ignore[no-untyped-def]
    def register(register):  # type: ignore[no-untyped-def]
        register(Keeper)

    plugin = types.SimpleNamespace(register_memory_providers=hookimpl(
        specname="register_memory_providers")(register))
    host = make_host(home, plugins=[("keeper", plugin)], builtins=False,
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
