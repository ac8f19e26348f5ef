"""Honcho provider benchmarks against the loopback Honcho-compatible server.

Prints medians and their ratio to the targets (ratio < 1.0 means the target is met). Nothing here
asserts: the machine is shared and noisy, so read the figures. Needs hermes-core-honcho installed
(``pip install -e plugins/memory/honcho``).

    python bench/bench_honcho.py [--turns 200] [--runs 5] [--slow 0.5]

* **prefetch from cache**: ``HonchoProvider.prefetch`` once ``queue_prefetch`` has prepared the
  recall; the call makes no request. Target: well under the kernel's 0.3 s deadline (we ask for
  1 ms). Hermes joins its Honcho prefetch thread on the turn for up to 8 s.
* **turn overhead**: ``Agent.run_turn`` with ``[file_memory, honcho]`` minus the same turn with
  ``[file_memory]`` alone, a stub LLM answering at once; the background work on the kernel's lanes
  (``sync_turn``/``queue_prefetch``, the outbox's sends and the recall refreshes on the provider's
  disposable lane) is settled between turns, outside the timing. Target: under 1 ms per turn.
* the same two with the server **slowed** by ``--slow`` seconds per request, and the first prefetch
  of a new session, which waits (bounded) for its first recall: target under the 0.3 s deadline.
* **write throughput**: turns stored per second on the provider's background lane (informative).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

import hermes_core_honcho.plugin as honcho_plugin
from hermes_core_honcho import HonchoProvider
from hermes_core_honcho.testing import HonchoTestServer

from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.host import PluginHost
from hermes_core.testing import CannedLLM, make_instance
from hermes_core.types import Message, Session

DEADLINE_MS = 300.0
TARGET_PREFETCH_MS = 1.0
TARGET_OVERHEAD_MS = 1.0


def section(server: HonchoTestServer) -> str:
    return f"honcho:\n  base_url: {server.url}\n  workspace: bench\n  timeout: 5\n"


def report(label: str, value: float, unit: str, target: float | None = None) -> None:
    ratio = f"  ratio to target {value / target:.3f} (target < {target:g} {unit})" if target else ""
    print(f"{label:<62} {value:10.4f} {unit}{ratio}")


def prefetch_ms(server: HonchoTestServer, home: Path, calls: int) -> tuple[float, float]:
    """Median prefetch (from cache) and the first prefetch of a fresh session, in ms."""
    provider = make_instance(HonchoProvider, "memory-provider", home, config=section(server))
    try:
        old = Session(id=f"old-{time.monotonic_ns()}")
        provider.sync_turn(user_message=Message("user", "I fixed the database hang by raising the "
                                                "pool size to 40."),
                           assistant_message=Message("assistant", "Noted."), session=old)
        provider.wait_idle(60)
        fresh = Session(id=f"new-{time.monotonic_ns()}")
        start = time.perf_counter()
        provider.prefetch(query="the database hang again", session=fresh)
        first = (time.perf_counter() - start) * 1000
        provider.queue_prefetch(query="the database hang again", session=fresh)
        provider.wait_idle(60)
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            provider.prefetch(query="the database hang again", session=fresh)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1000, first
    finally:
        provider.shutdown()


def turn_ms(server: HonchoTestServer, home: Path, providers: list[str], turns: int) -> float:
    """Median ``run_turn`` time in ms with background work settled between turns."""
    text = f"memory:\n  providers: [{', '.join(providers)}]\n" + section(server)
    host = PluginHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                           entry_points=False, directories=False,
                           plugins=[("honcho", honcho_plugin)])
    agent = Agent.create(host, CannedLLM("Noted."))  # answers at once; the only fake
    honcho = host.instances.get("memory-provider:honcho")
    samples = []
    try:
        for i in range(turns):
            start = time.perf_counter()
            agent.run_turn(f"Turn {i}: the nightly ETL into Postgres timed out again at 02:40.")
            samples.append(time.perf_counter() - start)
            agent.worker.flush(60)
            if honcho is not None:
                honcho.wait_idle(60)  # type: ignore[attr-defined]
    finally:
        agent.close()
    return statistics.median(samples[1:]) * 1000  # the first turn builds the session


def write_rate(server: HonchoTestServer, home: Path, turns: int) -> float:
    provider = make_instance(HonchoProvider, "memory-provider", home, config=section(server))
    try:
        session = Session(id=f"w-{time.monotonic_ns()}")
        provider.ensure_session(provider.session_id(session))
        start = time.perf_counter()
        for i in range(turns):
            provider.sync_turn(user_message=Message("user", f"message {i} " * 20),
                               assistant_message=Message("assistant", f"answer {i} " * 20),
                               session=session)
        provider.wait_idle(300)
        return turns / (time.perf_counter() - start)
    finally:
        provider.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--slow", type=float, default=0.5, help="added server latency, seconds")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print(f"{args.turns} turns/calls per run, {args.runs} runs (medians of the runs' medians)")
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-honcho-") as tmp:
        for run in range(args.runs):
            home = Path(tmp) / f"run{run}"
            home.mkdir()
            with HonchoTestServer(home / "honcho.db") as server:
                cached, first = prefetch_ms(server, home, args.turns * 5)
                figures.setdefault("prefetch", []).append(cached)
                figures.setdefault("first", []).append(first)
                base = turn_ms(server, home / "a", ["file_memory"], args.turns)
                with_honcho = turn_ms(server, home / "b", ["file_memory", "honcho"], args.turns)
                figures.setdefault("turn_base", []).append(base)
                figures.setdefault("overhead", []).append(with_honcho - base)
                figures.setdefault("writes", []).append(write_rate(server, home, args.turns))
                server.latency = args.slow
                cached, first = prefetch_ms(server, home, args.turns * 5)
                figures.setdefault("slow_prefetch", []).append(cached)
                figures.setdefault("slow_first", []).append(first)
                slow_turns = 8  # settling each turn costs a few slowed requests
                base = turn_ms(server, home / "c", ["file_memory"], slow_turns)
                with_honcho = turn_ms(server, home / "d", ["file_memory", "honcho"], slow_turns)
                figures.setdefault("slow_overhead", []).append(with_honcho - base)
    med = {k: statistics.median(v) for k, v in figures.items()}
    report("prefetch served from cache (median)", med["prefetch"], "ms", TARGET_PREFETCH_MS)
    report("  same, vs the kernel deadline", med["prefetch"], "ms", DEADLINE_MS)
    report("first prefetch of a new session (bounded wait)", med["first"], "ms", DEADLINE_MS)
    report("turn, file_memory only (median)", med["turn_base"], "ms")
    report("turn overhead added by honcho (median)", med["overhead"], "ms", TARGET_OVERHEAD_MS)
    report("background writes: turns stored per second", med["writes"], "turns/s")
    print(f"server slowed by {args.slow:g} s per request:")
    report("  prefetch served from cache (median)", med["slow_prefetch"], "ms", TARGET_PREFETCH_MS)
    report("  first prefetch of a new session (bounded wait)", med["slow_first"], "ms", DEADLINE_MS)
    report("  turn overhead added by honcho (median)", med["slow_overhead"], "ms", TARGET_OVERHEAD_MS)


if __name__ == "__main__":
    main()
