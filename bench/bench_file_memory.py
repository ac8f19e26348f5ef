"""File memory benchmark: add / replace / remove throughput and snapshot load time.

Method (the one of reference/perf-baseline.md section 2, so the figures compare):

* operations go through the ``memory`` tool's entry point (``Tool.invoke``: argument validation,
  threat scan, lock, re-read, atomic write with fsync, JSON result), 70-character entries, a raised
  limit so that 200 entries fit; each repetition starts from an empty directory and runs 200 adds,
  then 200 replaces (unique substring), then 200 removes; ops/s = 200 / elapsed; the figure is the
  median over the repetitions (9 by default, Hermes' figure used 5: more repetitions keep one rep
  stalled by another process's fsync storm from moving the median);
* snapshot load: both stores filled to ~2,100 / ~1,300 of their default limits (about 29 memory
  and 18 user entries of 60-85 characters), read from disk, deduplicated, threat-scanned and
  rendered, as at session start; p50 and p95.

Ratios compare with Hermes on this machine kind (640 ops/s, 1.4 ms): ratio >= 1.0 means at least
as good as Hermes. Nothing here asserts: the machine is shared and noisy, so read the figures.

    python bench/bench_file_memory.py [--reps 9] [--ops 200] [--loads 300]

``--mode semantic`` measures instead what semantic ranking costs ``prefetch`` (docs/file-memory.md,
"Semantic ranking"): a store of ``--entries`` (200) 70-character entries, one provider without an
embedder and one with the local all-MiniLM-L6-v2, asked the same distinct questions alternately
(A B A B, so machine noise hits both), each question new (no cached query vector); p50 / p95 of
each side, their ratio, and the with-embedder p95 against the kernel's prefetch deadline
(``memory.prefetch_timeout``, 300 ms). It also prints the one-off cost of the entry vectors (model
load excluded) and the memory they take.

    python bench/bench_file_memory.py --mode semantic [--entries 200] [--queries 60]
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import tempfile
import time
from pathlib import Path

from hermes_core.config import CoreConfig
from hermes_core.kinds import PluginContext
from hermes_core.plugins.memory.file_memory import FileMemory, FileMemoryConfig
from hermes_core.plugins.memory.file_memory.entries import joined_size
from hermes_core.plugins.memory.file_memory.snapshot import load_snapshot
from hermes_core.types import Session, ToolContext

HERMES_OPS_PER_S = 640.0
HERMES_LOAD_MS = 1.4

# Words of the kind memory notes are made of, trigger words of the threat scan included
# ("now", "must", "key", "system", "config", "token", ...), so the scan does real work.
_WORDS = """
user prefers concise answers project uses pytest deploys happen fridays build takes minutes cache
key lives in workflow file name is works on payments team remote timezone lisbon vim keybindings
tabs width four config stored under home directory api returns rate limit back off seconds must
run lint before pushing now uses postgres sixteen docker compose for local services system prompt
should stay short check logs first token expiry one hour network proxy blocks outbound traffic
context window large chat history kept ten days env file holds database url never commit it
"""
VOCAB = _WORDS.split()


def entry(rng: random.Random, n: int, width: int = 70) -> str:
    words = [f"[{n:04d}]"]
    while len(" ".join(words)) < width:
        words.append(rng.choice(VOCAB))
    return " ".join(words)[:width].rstrip()


def make_provider(home: Path, memory_limit: int = 2200) -> FileMemory:
    config = FileMemoryConfig(memory_char_limit=memory_limit)
    context = PluginContext(
        plugin_name="file_memory", home=home, config=CoreConfig(),
        logger=logging.getLogger("bench"),
    )
    return FileMemory(config=config, context=context)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def bench_ops(reps: int, ops: int) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {"add": [], "replace": [], "remove": []}
    latencies: dict[str, list[float]] = {"add": [], "replace": [], "remove": []}
    session = ToolContext(session=Session(id="bench"))
    for rep in range(reps):
        rng = random.Random(rep)
        with tempfile.TemporaryDirectory(prefix="bench-fm-") as tmp:
            provider = make_provider(Path(tmp), memory_limit=80 * ops + 100)
            tool = provider.get_tools()[0]
            texts = [entry(rng, n) for n in range(ops)]
            plans = {
                "add": [{"action": "add", "content": t} for t in texts],
                "replace": [
                    {"action": "replace", "old_text": f"[{n:04d}]", "content": entry(rng, n)}
                    for n in range(ops)
                ],
                "remove": [{"action": "remove", "old_text": f"[{n:04d}]"} for n in range(ops)],
            }
            for action, calls in plans.items():
                start = time.perf_counter()
                for args in calls:
                    t0 = time.perf_counter()
                    result = tool.invoke(args, session)
                    latencies[action].append(time.perf_counter() - t0)
                    if '"success": true' not in result:
                        raise SystemExit(f"{action} failed: {result}")
                rates[action].append(ops / (time.perf_counter() - start))
    return {**rates, **{f"{k}_lat": v for k, v in latencies.items()}}


def fill(provider: FileMemory, rng: random.Random) -> None:
    store = provider.store
    n = 0
    while joined_size(store.read("memory").entries) < 2100:
        store.add("memory", entry(rng, n, width=rng.randint(60, 85)))
        n += 1
    while joined_size(store.read("user").entries) < 1300:
        store.add("user", entry(rng, n, width=rng.randint(60, 85)))
        n += 1


def bench_load(loads: int) -> tuple[list[float], int, int, int]:
    with tempfile.TemporaryDirectory(prefix="bench-fm-") as tmp:
        provider = make_provider(Path(tmp))
        fill(provider, random.Random(42))
        mem = len(provider.store.read("memory").entries)
        usr = len(provider.store.read("user").entries)
        samples = []
        rendered = 0
        for _ in range(loads):
            start = time.perf_counter()
            snap = load_snapshot(provider.store)
            samples.append(time.perf_counter() - start)
            rendered = len(snap.text() or "")
        return samples, mem, usr, rendered


def disk_floor(runs: int = 200) -> tuple[float, float]:
    """p50 (ms) of a bare 14 KB write + fsync + rename, and of the same plus a directory fsync.

    The floor any durable atomic write pays on this disk at this moment; printed so that a slow
    run caused by other processes' I/O can be told from a slow store.
    """
    import os

    with tempfile.TemporaryDirectory(prefix="bench-fm-") as tmp:
        target = os.path.join(tmp, "f")
        data = b"x" * 14_000
        plain, with_dir = [], []
        for i in range(runs):
            start = time.perf_counter()
            fd, path = tempfile.mkstemp(dir=tmp)
            os.write(fd, data)
            os.fsync(fd)
            os.close(fd)
            os.replace(path, target)
            if i % 2:
                dfd = os.open(tmp, os.O_RDONLY)
                os.fsync(dfd)
                os.close(dfd)
                with_dir.append(time.perf_counter() - start)
            else:
                plain.append(time.perf_counter() - start)
    return percentile(plain, 0.5) * 1e3, percentile(with_dir, 0.5) * 1e3


PREFETCH_DEADLINE_MS = 300.0


def bench_semantic(entries: int, queries: int) -> None:
    from hermes_core.embeddings import GuardedEmbedder
    from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder

    why = MiniLMEmbedder.unavailable()
    if why:
        print(f"semantic mode needs the local embedder: {why}")
        return
    model = MiniLMEmbedder(MiniLMConfig())
    start = time.perf_counter()
    model.embed(["load the model"])
    load_s = time.perf_counter() - start
    guarded = GuardedEmbedder(model, timeout=60)
    rng = random.Random(5)
    texts = [entry(rng, n) for n in range(entries)]
    sides: dict[str, FileMemory] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, emb in (("words only", None), ("words+meaning", guarded)):
            home = Path(tmp) / name.replace(" ", "-").replace("+", "-")
            context = PluginContext(plugin_name="file_memory", home=home, config=CoreConfig(),
                                    logger=logging.getLogger("bench"),
                                    embedder=lambda emb=emb: emb)  # type: ignore[misc]
            config = FileMemoryConfig(memory_char_limit=entries * 80, recall_timeout=5.0)
            provider = FileMemory(config=config, context=context)
            provider.store.overwrite("memory", texts, expected=None)
            sides[name] = provider
        semantic = sides["words+meaning"]
        start = time.perf_counter()
        semantic.recall.warm(texts)
        semantic.recall.settle(600)
        warm_s = time.perf_counter() - start
        vectors = len(semantic.recall.cache)
        session = Session(id="bench", platform="bench")
        asked: dict[str, list[float]] = {name: [] for name in sides}
        recalled = 0
        for i in range(queries):
            question = (f"what did I note about {rng.choice(VOCAB)} and {rng.choice(VOCAB)} "
                        f"({i})?")
            for name, provider in sides.items():  # A B A B: the same question on each side
                start = time.perf_counter()
                out = provider.prefetch(query=question, session=session)
                asked[name].append(time.perf_counter() - start)
                recalled += bool(out) and name == "words+meaning"
    print(f"prefetch with {entries} entries of 70 characters, {queries} distinct questions, "
          f"A B A B (local all-MiniLM-L6-v2; model load {load_s:.2f} s, once per process)")
    p50s = {}
    for name, samples in asked.items():
        p50 = percentile(samples, 0.5) * 1e3
        p95 = percentile(samples, 0.95) * 1e3
        p50s[name] = p50
        print(f"  {name:<14} p50 {p50:8.3f} ms   p95 {p95:8.3f} ms   "
              f"p95 / deadline {PREFETCH_DEADLINE_MS:.0f} ms: {p95 / PREFETCH_DEADLINE_MS:.3f}")
    print(f"  ratio p50 words+meaning / words only: "
          f"{p50s['words+meaning'] / max(p50s['words only'], 1e-6):.0f}x "
          f"(words only recalls nothing: prefetch returns at once, as before)")
    print(f"  questions with entries recalled: {recalled}/{queries}")
    print(f"entry vectors: {vectors} computed in {warm_s:.2f} s "
          f"({warm_s / max(vectors, 1) * 1e3:.1f} ms per entry, in the background), "
          f"{vectors * 384 * 4 / 1024:.0f} KiB in memory (float32)")
    guarded.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("ops", "semantic"), default="ops")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--loads", type=int, default=300)
    parser.add_argument("--entries", type=int, default=200)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    if args.mode == "semantic":
        bench_semantic(args.entries, args.queries)
        return

    floor, floor_dir = disk_floor()
    print(
        f"disk floor now: write+fsync+rename p50 {floor:.2f} ms, plus directory fsync "
        f"{floor_dir:.2f} ms (the store pays the second)"
    )
    results = bench_ops(args.reps, args.ops)
    print(f"memory tool, {args.reps} reps x {args.ops} ops, 70-char entries (median ops/s)")
    for action in ("add", "replace", "remove"):
        rate = statistics.median(results[action])
        lat = results[f"{action}_lat"]
        print(
            f"  {action:<8} {rate:8.0f} ops/s   p50 {percentile(lat, 0.5) * 1e3:.2f} ms  "
            f"p95 {percentile(lat, 0.95) * 1e3:.2f} ms   "
            f"ratio vs Hermes {HERMES_OPS_PER_S:.0f} ops/s: {rate / HERMES_OPS_PER_S:.2f}x   "
            f"(reps: {', '.join(f'{r:.0f}' for r in results[action])})"
        )
    samples, mem, usr, rendered = bench_load(args.loads)
    p50 = percentile(samples, 0.5) * 1e3
    p95 = percentile(samples, 0.95) * 1e3
    print(
        f"snapshot load ({mem} memory + {usr} user entries, scan + render, {rendered} chars), "
        f"{args.loads} loads"
    )
    print(
        f"  p50 {p50:.3f} ms   p95 {p95:.3f} ms   "
        f"ratio vs Hermes {HERMES_LOAD_MS} ms: {HERMES_LOAD_MS / p50:.2f}x faster"
    )


if __name__ == "__main__":
    main()
