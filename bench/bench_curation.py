"""Curation benchmarks: what the review/flush/nudge machinery costs a turn, and skills in the prompt.

Prints medians and their ratio to the targets of issue 11 (ratio < 1.0 means the target is met).
Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_curation.py [--turns 2000] [--runs 7]

* **Turn overhead when no review is due**: the curator's per-turn work (``begin_turn``, the skill
  nudge check after a tool batch, ``end_turn``'s counting, ``take_notices``), timed directly, in
  microseconds; and, for context, a whole ``Agent.run_turn`` (stub LLM, no providers, the memory
  and skill tools present) with ``memory.nudge_interval: 10000`` (counting, never due) against
  ``nudge_interval: 0`` (curation off). Target: under 2 % of the kernel's 1 ms per-turn target.
* **Prompt assembly with 100 skills**: the skills provider's ``system_prompt_block`` for a new
  session id, cold (a fresh library: every file read and parsed) and warm (files unchanged since
  the last session: served from the parse cache), and the agent's whole prompt assembly.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_core import MemoryProvider, PluginHost, Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.curation import Curator
from hermes_core.kinds import PluginContext
from hermes_core.plugins.memory.skills import SkillsConfig, SkillsProvider
from hermes_core.testing import CannedLLM
from hermes_core.toolrun import ToolOutcome, ToolRouter
from hermes_core.types import Session, ToolCall

TARGET_CURATION_US = 20.0  # 2 % of bench_agent's 1 ms kernel-overhead target
TARGET_COLD_MS = 25.0  # a new session with 100 skills on disk
TARGET_WARM_MS = 2.0  # the same, files unchanged (the parse cache serves them)


class Tools(MemoryProvider):
    """Offers tools named ``memory`` and ``skill_manage`` (no-ops), so every curation path that
    looks for them finds them."""

    name = "bench_tools"

    @hookimpl
    def get_tools(self) -> list[Tool]:
        schema = {"type": "object", "properties": {}}
        return [Tool("memory", "no-op", lambda a, c: "{}", parameters=schema),
                Tool("skill_manage", "no-op", lambda a, c: "{}", parameters=schema)]


def _host(home: Path, memory: str) -> PluginHost:
    class Reg:
        @hookimpl
        def register_memory_providers(self, register: Any) -> None:
            register(Tools)

    config = parse_config_text(f"memory:\n  providers: [bench_tools]\n{memory}context:\n"
                               "  engine: none\n", home / "config.yaml")
    host = PluginHost.load(home, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("bench", Reg())])
    host.activate_memory_providers()
    return host


def curator_overhead(turns: int) -> float:
    """Median microseconds of the curator's work for one turn with one tool batch."""
    with tempfile.TemporaryDirectory() as tmp:
        host = _host(Path(tmp), "  nudge_interval: 10000\n")
        curator = Curator(host)
        router = ToolRouter(host.tools())
        calls = [ToolCall("c1", "read_file", {"path": "x"})]
        outcomes = [ToolOutcome(calls[0], "p", "{}")]
        samples = []
        for _ in range(turns):
            start = time.perf_counter()
            curator.begin_turn()
            curator.skill_nudge(router, calls)
            curator.end_turn(outcomes, lambda: None)
            curator.take_notices()
            samples.append((time.perf_counter() - start) * 1e6)
        host.shutdown()
    return statistics.median(samples)


def turn_time(memory: str, turns: int) -> float:
    """Median ms of a whole run_turn."""
    with tempfile.TemporaryDirectory() as tmp:
        agent = Agent(_host(Path(tmp), memory), CannedLLM())  # answers at once; the only fake
        for _ in range(50):
            agent.run_turn("warm up")
        samples = []
        for i in range(turns):
            if i % 100 == 0:
                agent.history.clear()
            start = time.perf_counter()
            agent.run_turn("what did we decide about the depot indexes?")
            samples.append((time.perf_counter() - start) * 1000)
        agent.close()
    return statistics.median(samples)


def _write_skills(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    for n in range(count):
        name = f"procedure-{n:03d}"
        (folder / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: How to run step {n} of the release checklist "
            f"safely on the staging cluster\n---\n" + "1. Do the thing carefully.\n" * 40,
            encoding="utf-8")


def skills_assembly(count: int, runs: int) -> tuple[float, float, float, int]:
    """(cold ms, warm ms, agent assembly ms, block chars) with ``count`` skills; medians."""
    cold, warm, whole = [], [], []
    chars = 0
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        _write_skills(home / "skills", count)
        context = PluginContext("skills", home, parse_config_text("", home / "c.yaml").core,
                                __import__("logging").getLogger("bench"))
        for run in range(runs):
            provider = SkillsProvider(SkillsConfig(), context)
            start = time.perf_counter()
            block = provider.system_prompt_block(Session(id=f"cold-{run}"))
            cold.append((time.perf_counter() - start) * 1000)
            chars = len(block or "")
            start = time.perf_counter()
            provider.system_prompt_block(Session(id=f"warm-{run}"))
            warm.append((time.perf_counter() - start) * 1000)
        config = parse_config_text("memory:\n  providers: [skills]\ncontext:\n  engine: none\n",
                                   home / "config.yaml")
        host = PluginHost.load(home, config=config, entry_points=False, directories=False)
        host.activate_memory_providers()
        agent = Agent(host, CannedLLM())  # answers at once; the only fake
        agent.start()
        for _ in range(runs):
            agent.session = Session(id=f"s-{time.perf_counter_ns()}")  # force a fresh freeze
            start = time.perf_counter()
            agent._assemble()
            whole.append((time.perf_counter() - start) * 1000)
        agent.close()
    return statistics.median(cold), statistics.median(warm), statistics.median(whole), chars


def report(label: str, value: float, unit: str, target: float | None = None) -> None:
    ratio = f"  ratio to target {value / target:.2f} (target < {target:g} {unit})" if target else ""
    print(f"{label:<62} {value:9.3f} {unit}{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"{args.turns} turns per figure, {args.runs} runs for prompt assembly (medians)")
    report("curation work per turn, no review due", curator_overhead(args.turns), "us",
           TARGET_CURATION_US)
    counting = turn_time("  nudge_interval: 10000\n", args.turns)
    off = turn_time("  nudge_interval: 0\n", args.turns)
    report("whole turn, curation counting (nudge_interval 10000)", counting, "ms")
    report("whole turn, curation off (nudge_interval 0)", off, "ms")
    report("  difference", (counting - off) * 1000, "us")
    cold, warm, whole, chars = skills_assembly(100, args.runs)
    report(f"skills block, 100 skills, cold ({chars} chars)", cold, "ms", TARGET_COLD_MS)
    report("skills block, 100 skills, warm (parse cache)", warm, "ms", TARGET_WARM_MS)
    report("agent prompt assembly with 100 skills (warm)", whole, "ms")


if __name__ == "__main__":
    main()
