"""Benchmark: the compressor's compress() and the token estimator.

Method (mirrors reference/perf-baseline.md section 3 so the figures compare with Hermes'):

* synthetic, seeded conversations: a ~12k-character system prompt first, then turns of one user
  message, 0-3 tool calls (read_file with repeated paths, terminal, write_file, search) each with
  its result, and an assistant answer; message lengths log-uniform (50-2,000 characters, tool
  outputs 200-6,000); about 3% of messages carry CJK text;
* a 200,000-token window, default settings (threshold 0.5);
* **the summariser is stubbed**: it returns a fixed ~150-character summary at once, so what is
  timed is the engine's own work (planning, pass 1, serialising the bounded summariser input,
  assembly, repair);
* every repetition compacts a fresh deep copy (the per-object token cache starts cold); p50/p95
  over the repetitions (nearest rank); the machine is shared, so medians are the figure to read.

Run: ``python bench/bench_compressor.py [--reps 9]``.
"""

from __future__ import annotations

import argparse
import copy
import logging
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

from hermes_core.compaction.repair import history_problems
from hermes_core.compaction.tokens import estimate_messages, estimate_text
from hermes_core.config import CoreConfig, LLMSection
from hermes_core.kinds import PluginContext
from hermes_core.plugins.context_engine.compressor import Compressor, CompressorConfig
from hermes_core.types import Message, ToolCall

TARGET_2000_MS = 20.0
HERMES_MS = {500: 10.4, 2_000: 72.7}
HERMES_P95_MS = {500: 20.6, 2_000: 105.0}
HERMES_ESTIMATE_MS = {500: 1.8, 2_000: 7.5}

WORDS = [
    "the", "a", "to", "of", "and", "in", "is", "it", "for", "on", "that", "with", "as", "this",
    "be", "are", "was", "by", "at", "or", "from", "parser", "cache", "index", "migration", "schema",
    "handler", "retry", "timeout", "config", "deploy", "build", "test", "fixture", "module",
    "import", "latency", "queue", "worker", "session", "budget", "summary", "archive", "function",
    "return", "value", "error", "file", "path",
]
CJK = "数据库迁移失败需要重新运行测试并检查配置文件中的超时设置"


class StubSummariser:
    """The fake part: a fixed summary, instantly. Counts calls and prompt sizes."""

    def __init__(self) -> None:
        self.prompt_chars: list[int] = []

    def complete(self, *, system: str, messages: list[Message], max_tokens: int,
                 model: str | None = None, timeout: float | None = None) -> str:
        self.prompt_chars.append(len(system) + sum(len(m.content) for m in messages))
        return "## Goal\nShip the parser refactor.\n\n## Progress\n### Done\n1. Fixed tests.\n" \
               "## Next Steps\n- Deploy to staging."


def text(rng: random.Random, low: int, high: int) -> str:
    size = int(math.exp(rng.uniform(math.log(low), math.log(high))))
    out = []
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(WORDS))
    body = " ".join(out)[:size]
    if rng.random() < 0.03:
        body = CJK * max(1, size // (len(CJK) * 3)) + " " + body[: size // 2]
    return body


def conversation(n_messages: int, seed: int = 1) -> list[Message]:
    rng = random.Random(seed)
    out = [Message("system", "You are a coding agent. " + text(rng, 12_000, 12_001))]
    paths = [f"src/pkg/module_{i}.py" for i in range(25)]
    call = 0
    while len(out) < n_messages:
        out.append(Message("user", text(rng, 50, 2_000)))
        for _ in range(rng.randint(0, 3)):
            call += 1
            name = rng.choice(("read_file", "terminal", "write_file", "search_files"))
            args: dict[str, Any] = {"path": rng.choice(paths)}
            if name == "terminal":
                args = {"command": f"pytest -q tests/test_{rng.randint(1, 40)}.py"}
            elif name == "search_files":
                args = {"pattern": rng.choice(WORDS), "path": "src"}
            elif name == "write_file":
                args["content"] = text(rng, 100, 1_500)
            cid = f"call_{call}"
            out.append(Message("assistant", text(rng, 20, 300), tool_calls=[ToolCall(cid, name, args)]))
            out.append(Message("tool", text(rng, 300, 8_000), tool_call_id=cid, tool_name=name))
        out.append(Message("assistant", text(rng, 50, 2_000)))
    return out[:n_messages]


def trimmed(history: list[Message]) -> list[Message]:
    """Cut at a turn boundary so the conversation ends with an assistant answer."""
    end = len(history)
    while end > 1 and not (history[end - 1].role == "assistant" and not history[end - 1].tool_calls):
        end -= 1
    return history[:end]


def engine(**settings: Any) -> tuple[Compressor, StubSummariser]:
    stub = StubSummariser()
    ctx = PluginContext(
        plugin_name="bench", home=Path("."), config=CoreConfig(llm=LLMSection(context_window=200_000)),
        logger=logging.getLogger("bench"),
    )
    return Compressor(CompressorConfig(**settings), ctx, llm=stub), stub


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def bench_compress(n: int, reps: int, **settings: Any) -> dict[str, Any]:
    history = trimmed(conversation(n + 10))
    times: list[float] = []
    result = None
    eng, stub = engine(**settings)
    for _ in range(reps):
        fresh = copy.deepcopy(history)
        eng.begin_turn()
        started = time.perf_counter()
        result = eng.compact(fresh)
        times.append((time.perf_counter() - started) * 1000)
    assert result is not None and history_problems(result.messages) == []
    assert eng.last_report is not None
    return {
        "n": len(history),
        "tokens_in": estimate_messages(history),
        "p50": statistics.median(times),
        "p95": pct(times, 0.95),
        "out_messages": len(result.messages),
        "tokens_out": estimate_messages(result.messages),
        "source": eng.last_report.source,
        "prompt_chars": stub.prompt_chars[-1] if stub.prompt_chars else 0,
    }


def bench_recompress(n: int, grow: int, reps: int) -> dict[str, Any]:
    eng, _ = engine(prune_only_below=0)
    first = eng.compact(trimmed(conversation(n + 10))).messages
    grown = first + trimmed(conversation(grow + 10, seed=2))[1:]
    times = []
    result = None
    for _ in range(reps):
        fresh = copy.deepcopy(grown)
        eng.begin_turn()
        started = time.perf_counter()
        result = eng.compact(fresh)
        times.append((time.perf_counter() - started) * 1000)
    assert result is not None
    return {"in": len(grown), "out": len(result.messages), "p50": statistics.median(times)}


def bench_estimate(n: int, reps: int) -> dict[str, float]:
    history = trimmed(conversation(n + 10))
    chars = sum(len(m.content) for m in history)
    cold, warm = [], []
    for _ in range(reps):
        fresh = copy.deepcopy(history)
        started = time.perf_counter()
        estimate_messages(fresh)
        cold.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        estimate_messages(fresh)
        warm.append((time.perf_counter() - started) * 1000)
    return {
        "n": len(history),
        "chars": chars,
        "cold_ms": statistics.median(cold),
        "warm_ms": statistics.median(warm),
        "msgs_per_s": len(history) / (statistics.median(cold) / 1000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    reps = max(7, args.reps)
    print(f"compress(), summariser stubbed (fixed ~150-char summary), {reps} reps, p50/p95 in ms")
    print(f"{'messages':>9} {'tokens in':>10} {'p50':>7} {'p95':>7} {'out msgs':>9} {'tokens out':>10} "
          f"{'path':>11} {'prompt chars':>12}  vs Hermes p50 (ratio)   vs target")
    for label, settings in (("summary path (prune_only_below=0)", {"prune_only_below": 0}),
                            ("default settings", {})):
        print(f"-- {label}")
        for n in (500, 2_000):
            r = bench_compress(n, reps, **settings)
            hermes = HERMES_MS[n]
            target = f"{r['p50'] / TARGET_2000_MS:.2f}x of the 20 ms target" if n == 2_000 else ""
            print(f"{r['n']:>9} {r['tokens_in']:>10} {r['p50']:>7.1f} {r['p95']:>7.1f} "
                  f"{r['out_messages']:>9} {r['tokens_out']:>10} {r['source']:>11} {r['prompt_chars']:>12}"
                  f"  {hermes:>5} ms ({r['p50'] / hermes:.2f}x)   {target}")
    print("-- re-compaction of a grown transcript (iterative summary update)")
    for n, grow in ((500, 350), (2_000, 300)):
        r = bench_recompress(n, grow, reps)
        print(f"   {r['in']} -> {r['out']} messages: p50 {r['p50']:.1f} ms")
    print("token estimate (estimate_messages), cold = fresh objects, warm = args cache hit")
    for n in (500, 2_000):
        r = bench_estimate(n, reps)
        hermes = HERMES_ESTIMATE_MS[n]
        print(f"   {r['n']} messages, {r['chars'] / 1e6:.2f}M chars: cold {r['cold_ms']:.2f} ms "
              f"({r['msgs_per_s'] / 1e6:.2f}M msgs/s), warm {r['warm_ms']:.2f} ms; Hermes chars/4 "
              f"{hermes} ms (ratio {r['cold_ms'] / hermes:.2f}x)")
    sample = "word " * 20_000
    cjk = CJK * 500
    for label, s in (("100k ASCII chars", sample), (f"{len(cjk)} CJK chars", cjk)):
        loops = 2_000 if s is sample else 200
        started = time.perf_counter()
        for _ in range(loops):
            estimate_text(s)
        per = (time.perf_counter() - started) / loops * 1e6
        print(f"   estimate_text on {label}: {per:.2f} us per call")


if __name__ == "__main__":
    main()
