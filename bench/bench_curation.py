"""Curation benchmarks: what the review/flush/nudge machinery costs a turn, and skills in the prompt.

Prints medians and their ratio to the targets of issues 11 and 21 (ratio < 1.0 means the target
is met). Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_curation.py [--turns 2000] [--runs 7] [--part all|turns|memory]
    python bench/bench_curation.py --part memory [--messages 100000]

* **Turn overhead when no review is due**: the curator's per-turn work (``begin_turn``, the skill
  nudge check after a tool batch, ``end_turn``'s counting, ``take_notices``), timed directly, in
  microseconds; and, for context, a whole ``Agent.run_turn`` (stub LLM, no providers, the memory
  and skill tools present) with ``memory.nudge_interval: 10000`` (counting, never due) against
  ``nudge_interval: 0`` (curation off). Target: under 2 % of the kernel's 1 ms per-turn target.
* **Prompt assembly with 100 skills**: the skills provider's ``system_prompt_block`` for a new
  session id, cold (a fresh library: every file read and parsed) and warm (files unchanged since
  the last session: served from the parse cache), and the agent's whole prompt assembly.

Issue 21 (``--part memory``):

* **Offline curation of a full MEMORY.md** (2,200 characters, 30 entries with duplicates, near
  duplicates and superseded facts): ``curator.propose``, file read included. Target <= 50 ms.
* **History append per memory write**: the version log's own work for one write of a full store
  (build the version with both store texts, append the line, the prune check), timed directly; and,
  side by side in one run, whole durable ``replace`` writes with the history on and off (their
  difference is mostly fsync noise on a shared disk, so the direct figure carries the ratio).
  Target <= 0.2 ms.
* **forget over a 100k-message archive**: the seeded corpus of bench_session_archive, plus 20
  messages naming a rare subject; the dry run and the real deletion (FTS5 index kept in step), and
  for scale a common word that matches thousands of messages. Target <= 1 s.
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
from hermes_core.kinds import PluginContext
from hermes_core.plugins.memory.skills import SkillsConfig, SkillsProvider
from hermes_core.plugins.memory_review.curator import Curator
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


TARGET_CURATE_MS = 50.0
TARGET_HISTORY_MS = 0.2
TARGET_FORGET_S = 1.0


def _full_store(directory: Path, history_limit: int = 200) -> Any:
    from hermes_core.plugins.memory.file_memory import MemoryStore
    from hermes_core.plugins.memory.file_memory.entries import canonical_text, joined_size

    entries = [f"Project note {n}: the build of service {n} uses cache layer {n % 7} and "
               f"port {8000 + n}" for n in range(22)]
    entries += [entries[3], entries[5].upper(), entries[7] + " daily",
                "User lives in Berlin", "User moved to Lisbon in 2025", "Editor: vim",
                "Editor: helix"]
    while joined_size(entries) > 2200:
        entries.pop(0)
    room = 2200 - joined_size(entries) - 3
    if room > 20:  # fill the store to its limit exactly
        entries.append(("Reminder: the release checklist lives in docs/release.md and is "
                        "reviewed every quarter by the platform team " * 3)[:room].strip())
    store = MemoryStore(directory, memory_limit=2200, history_limit=history_limit)
    directory.mkdir(parents=True, exist_ok=True)
    store.path("memory").write_text(canonical_text(entries) + "\n", encoding="utf-8")
    return store


def curate_time(runs: int) -> tuple[float, int, int]:
    """(median ms of an offline proposal for a full store, its changes, store chars)."""
    from hermes_core.plugins.memory.file_memory.curator import propose

    with tempfile.TemporaryDirectory() as tmp:
        store = _full_store(Path(tmp) / "memories")
        samples = []
        proposal = None
        for _ in range(max(runs, 20)):
            start = time.perf_counter()
            proposal = propose(store, "memory")
            samples.append((time.perf_counter() - start) * 1000)
        assert proposal is not None
        return statistics.median(samples), len(proposal.changes), proposal.size_before


def history_cost(writes: int) -> tuple[float, float, float, float]:
    """(median and mean ms of the history's own work per write (the mean includes the periodic
    prune rewrite); median ms per durable replace with history; without)."""
    from hermes_core.plugins.memory.file_memory.history import Version, now

    with tempfile.TemporaryDirectory() as tmp:
        store = _full_store(Path(tmp) / "on")
        history = store.history
        text = store.path("memory").read_text(encoding="utf-8")
        direct = []
        for n in range(writes):
            start = time.perf_counter()
            with history.locked():
                history.append(lambda v, n=n: Version(
                    v, now(), "replace", "assistant_tool",
                    [{"target": "memory", "action": "replace", "old": "Project note 9",
                      "new": f"Project note 9 rev {n}"}],
                    {"memory": {"before": text, "after": text}}, session_id="s", message_id="c"))
                history.prune()
            direct.append((time.perf_counter() - start) * 1000)
        on = _full_store(Path(tmp) / "w-on")
        off = _full_store(Path(tmp) / "w-off", history_limit=0)
        with_h, without = [], []
        for n in range(writes // 4):
            for target_store, bucket in ((on, with_h), (off, without)):
                start = time.perf_counter()
                target_store.replace("memory", "Project note 10:", "Project note 10: the build of "
                                     f"service 10 uses cache layer 3 and port {8010 + n % 2}")
                bucket.append((time.perf_counter() - start) * 1000)
        return (statistics.median(direct), statistics.fmean(direct), statistics.median(with_h),
                statistics.median(without))


def forget_time(messages: int) -> list[tuple[str, float, int]]:
    """[(label, seconds, matched)] for forget over an archive of ``messages`` messages."""
    from session_corpus import Corpus

    from hermes_core.plugins.memory.session_archive import SessionArchive
    from hermes_core.plugins.memory.session_archive.forget import forget_messages
    from hermes_core.types import Message

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.db"
        corpus = Corpus()
        done = 0
        with SessionArchive(path, synchronous="normal") as archive:
            for sid, msgs in corpus.sessions():
                if done >= messages:
                    break
                msgs = msgs[: messages - done]
                archive.append_messages(sid, msgs)
                done += len(msgs)
            archive.append_messages("rare-subject", [
                Message("user", f"note {n}: the Zanzibarquay office opens at {n}")
                for n in range(20)])
            total = archive.count_messages()
            for label, subject, dry in (("dry run, rare subject (20 matches)", "Zanzibarquay", True),
                                        ("delete, rare subject (20 matches)", "Zanzibarquay", False),
                                        ("dry run, common word 'deploy'", "deploy", True),
                                        ("delete, common word 'deploy'", "deploy", False)):
                start = time.perf_counter()
                found = forget_messages(archive, subject, dry_run=dry)
                out.append((f"{label} in {total:,} messages", time.perf_counter() - start,
                            found.matched))
    return out


def memory_part(runs: int, messages: int) -> None:
    ms, changes, chars = curate_time(runs)
    report(f"curate a {chars:,}-char MEMORY.md offline ({changes} changes)", ms, "ms",
           TARGET_CURATE_MS)
    direct, mean, with_h, without = history_cost(400)
    report("history append per write (direct: build, append, prune check)", direct, "ms",
           TARGET_HISTORY_MS)
    report("  mean, with the prune rewrite every 100 writes (limit 200)", mean, "ms",
           TARGET_HISTORY_MS)
    report("durable replace of a full store, history on", with_h, "ms")
    report("durable replace of a full store, history off", without, "ms")
    report("  difference (fsync noise dominates)", with_h - without, "ms")
    for label, seconds, matched in forget_time(messages):
        report(f"forget: {label} ({matched:,} matched)", seconds, "s",
               TARGET_FORGET_S if "rare" in label else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--part", choices=["all", "turns", "memory"], default="all")
    parser.add_argument("--messages", type=int, default=100_000,
                        help="archive size for the forget figure (default 100000)")
    args = parser.parse_args()
    if args.part in ("all", "memory"):
        memory_part(args.runs, args.messages)
    if args.part == "memory":
        return
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
