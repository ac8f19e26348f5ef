"""Lossless engine: ``context_search`` latency by words only and by words + meaning, side by side.

One conversation's history is compacted into ``context.db`` (synthetic turns with tool outputs,
``--turns`` of them); the vectors of the archived messages are then computed by the engine's
background indexer with the local all-MiniLM-L6-v2 (its rate is printed). Two engines over copies
of the same archive, one without an embedder and one with it, are asked the same distinct
questions alternately (A B A B); p50 / p95 of each side and their ratio are printed. Nothing
asserts: the machine is shared, read the figures (and the load printed with them).

    python bench/bench_lossless_search.py [--turns 400] [--queries 40]
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from compressor_support import build_history

from hermes_core.config import CoreConfig, LLMSection
from hermes_core.embeddings import GuardedEmbedder
from hermes_core.kinds import PluginContext
from hermes_core.plugins.context_engine.lossless import LosslessConfig, LosslessEngine
from hermes_core.types import ToolContext


def engine(home: Path, embedder: Any, window: int) -> LosslessEngine:
    context = PluginContext(plugin_name="bench", home=home,
                            config=CoreConfig(llm=LLMSection(context_window=window)),
                            logger=logging.getLogger("bench"), embedder=lambda: embedder)
    return LosslessEngine(LosslessConfig(), context)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder

    why = MiniLMEmbedder.unavailable()
    if why:
        print(f"needs the local embedder: {why}")
        return
    guarded = GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=120)
    guarded.embed(["load the model"])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        words_home, both_home = Path(tmp) / "words", Path(tmp) / "both"
        words_home.mkdir()
        builder = engine(words_home, None, 30_000)
        builder.compact(build_history(args.turns, seed=3, tool_output_chars=600))
        conversation = builder.conversation
        builder.shutdown()
        shutil.copytree(words_home, both_home)
        sides = {"words only": engine(words_home, None, 30_000),
                 "words+meaning": engine(both_home, guarded, 30_000)}
        for e in sides.values():
            e.conversation = conversation
        vec = sides["words+meaning"].vectors()
        assert vec is not None
        pending = vec.pending()
        start = time.perf_counter()
        vec.wake()
        vec.settle(3600)
        took = time.perf_counter() - start
        print(f"{pending} archived messages embedded in the background in {took:.1f} s "
              f"({pending / took:.1f} messages/s), {4 * 384} bytes of vector per message")
        rng = random.Random(9)
        samples: dict[str, list[float]] = {name: [] for name in sides}
        vocab = ["deploy", "timeout", "cache", "retry", "database", "login", "schema", "proxy"]
        for i in range(args.queries):
            query = f"how did we handle the {rng.choice(vocab)} problem {i}?"
            for name, e in sides.items():
                tool = {t.name: t for t in e.get_tools()}["context_search"]
                start = time.perf_counter()
                tool.invoke({"query": query}, ToolContext())
                samples[name].append(time.perf_counter() - start)
        p50s = {}
        for name, s in samples.items():
            p50s[name] = percentile(s, 0.5) * 1e3
            print(f"  context_search {name:<14} p50 {p50s[name]:7.2f} ms   "
                  f"p95 {percentile(s, 0.95) * 1e3:7.2f} ms")
        print(f"  ratio p50 words+meaning / words only: "
              f"{p50s['words+meaning'] / max(p50s['words only'], 1e-6):.1f}x")
        for e in sides.values():
            e.shutdown()
    guarded.close()


if __name__ == "__main__":
    main()
