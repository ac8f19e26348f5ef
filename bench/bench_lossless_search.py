"""Lossless engine: ``context_search`` latency by words only and by words + meaning, side by side.

One conversation's history is compacted into ``context.db`` (synthetic turns with tool outputs,
``--turns`` of them); the vectors of the archived messages are then computed by the engine's
background indexer with the local all-MiniLM-L6-v2 (its rate is printed). Two engines over copies
of the same archive, one without an embedder and one with it, are asked the same distinct
questions alternately (A B A B); p50 / p95 of each side and their ratio are printed. Nothing
asserts: the machine is shared, read the figures (and the load printed with them).

With ``--postgresql`` (a throwaway server is started and stopped; or ``--url``), the archive is
also copied into PostgreSQL (``storage migrate``'s copy) with the vectors already computed (copied
by message position, so the model runs once), and two more engines on the database join the
rotation: words only, and words + meaning (the conversation's vectors read with one query, cosine
in numpy). The target for meaning on PostgreSQL: p95 within 2x of the SQLite figure.

With ``--words-only`` no model is loaded: only the words-only engine is measured (to compare two
revisions of the store side by side, one process each, A B A B).

    python bench/bench_lossless_search.py [--turns 400] [--queries 40] [--postgresql [--url URL]]
    python bench/bench_lossless_search.py --words-only [--turns 400] [--queries 40]
    python bench/bench_lossless_search.py --words-only --against CHECKOUT

``--against CHECKOUT`` (a checkout of another revision) adds that revision's lossless engine,
loaded in this process from ``CHECKOUT/plugins/context_engine/lossless`` (the kernel stays this
tree's), over a copy of the same archive: both are asked each question, in alternating order,
so the two revisions are compared side by side under the same load.
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


def copy_to_postgres(files: LosslessEngine, url: str, embedder: Any, window: int,
                     conversation: str) -> dict[str, LosslessEngine]:
    """The archive (and its vectors, copied by ``storage migrate``'s code) in ``url``; the two
    engines."""

    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.plugins.context_engine.lossless.transfer import copy_lossless
    from hermes_core.storage import parse_storage_url

    store = PgSpanStore(parse_storage_url(url))
    out = copy_lossless(files.store, store)  # the vectors too, by span and position
    os.environ["HERMES_CORE_STORAGE_URL"] = url
    try:
        sides = {"PG words only": engine(Path(files.context.home), None, window),
                 "PG words+meaning": engine(Path(files.context.home), embedder, window)}
    finally:
        del os.environ["HERMES_CORE_STORAGE_URL"]
    vec = sides["PG words+meaning"].vectors()
    assert vec is not None and out.vectors_copied == out.vectors
    for e in sides.values():
        e.conversation = conversation
    assert vec.pending() == 0
    return sides


def other_engine(checkout: Path, home: Path) -> Any:
    """The lossless engine of another revision (``--against``), on the archive in ``home``."""
    import importlib.util

    root = checkout / "plugins" / "context_engine" / "lossless"
    spec = importlib.util.spec_from_file_location("against_lossless", root / "__init__.py",
                                                  submodule_search_locations=[str(root)])
    assert spec is not None and spec.loader is not None, f"no lossless package in {checkout}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    context = PluginContext(plugin_name="bench", home=home,
                            config=CoreConfig(llm=LLMSection(context_window=30_000)),
                            logger=logging.getLogger("bench"), embedder=lambda: None)
    return module.LosslessEngine(module.LosslessConfig(), context)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--postgresql", action="store_true",
                        help="also on PostgreSQL (a throwaway server unless --url)")
    parser.add_argument("--url", default=None, help="an empty PostgreSQL database to use")
    parser.add_argument("--words-only", action="store_true",
                        help="no model: the SQLite words-only engine alone")
    parser.add_argument("--against", type=Path, default=None,
                        help="with --words-only: a checkout whose lossless engine runs beside")
    args = parser.parse_args()
    if args.words_only:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        run(args, None, None)
        return
    from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder

    why = MiniLMEmbedder.unavailable()
    if why:
        print(f"needs the local embedder: {why}")
        return
    guarded = GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=120)
    guarded.embed(["load the model"])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    server = None
    url = args.url
    if args.postgresql and url is None:
        from hermes_core.testing.postgres import temp_postgres

        server = temp_postgres()
        url = server.__enter__().create_database("bench_lossless")
    try:
        run(args, guarded, url if args.postgresql else None)
    finally:
        if server is not None:
            from hermes_core.storage import close_pools

            close_pools()
            server.__exit__(None, None, None)
        guarded.close()


def embed_all(sides: dict[str, LosslessEngine], guarded: Any, url: str | None,
              conversation: str) -> None:
    """The words+meaning side's vectors computed (and the PostgreSQL sides added with them)."""
    vec = sides["words+meaning"].vectors()
    assert vec is not None
    pending = vec.pending()
    start = time.perf_counter()
    vec.wake()
    vec.settle(3600)
    took = time.perf_counter() - start
    if url is not None:
        sides.update(copy_to_postgres(sides["words+meaning"], url, guarded, 30_000, conversation))
    store = sides["words+meaning"].store
    (size,) = store.db.fetch(f"SELECT avg(length(vec)) FROM {store.prefix}span_vectors "
                             "WHERE length(vec) > 0")[0]
    print(f"{pending} archived messages embedded in the background in {took:.1f} s "
          f"({pending / took:.1f} messages/s), {float(size or 0):.0f} bytes of vector per "
          "message (as stored)")


def run(args: argparse.Namespace, guarded: Any, url: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        words_home, both_home = Path(tmp) / "words", Path(tmp) / "both"
        words_home.mkdir()
        builder = engine(words_home, None, 30_000)
        builder.compact(build_history(args.turns, seed=3, tool_output_chars=600))
        conversation = builder.conversation
        builder.shutdown()
        shutil.copytree(words_home, both_home)
        sides = {"words only": engine(words_home, None, 30_000)}
        if args.against is not None:
            shutil.copytree(words_home, Path(tmp) / "against")
            sides["words only (against)"] = other_engine(args.against, Path(tmp) / "against")
        if guarded is not None:
            sides["words+meaning"] = engine(both_home, guarded, 30_000)
        for e in sides.values():
            e.conversation = conversation
        if guarded is not None:
            embed_all(sides, guarded, url, conversation)
        rng = random.Random(9)
        samples: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}  # this thread's CPU time
        vocab = ["deploy", "timeout", "cache", "retry", "database", "login", "schema", "proxy"]
        for i in range(args.queries):
            query = f"how did we handle the {rng.choice(vocab)} problem {i}?"
            for name, e in list(sides.items())[::1 if i % 2 == 0 else -1]:
                tool = {t.name: t for t in e.get_tools()}["context_search"]
                start, cpu_start = time.perf_counter(), time.thread_time()
                tool.invoke({"query": query}, ToolContext())
                samples[name].append(time.perf_counter() - start)
                cpu[name].append(time.thread_time() - cpu_start)
        p50s = {}
        for name, s in samples.items():
            p50s[name] = percentile(s, 0.5) * 1e3
            print(f"  context_search {name:<20} p50 {p50s[name]:7.2f} ms   "
                  f"p95 {percentile(s, 0.95) * 1e3:7.2f} ms   "
                  f"CPU p50 {percentile(cpu[name], 0.5) * 1e3:7.2f} ms")
        if "words only (against)" in p50s:
            print(f"  ratio p50 words only this tree / against: "
                  f"{p50s['words only'] / max(p50s['words only (against)'], 1e-6):.2f}x")
        if "words+meaning" in p50s:
            print(f"  ratio p50 words+meaning / words only: "
                  f"{p50s['words+meaning'] / max(p50s['words only'], 1e-6):.1f}x")
        if url is not None:
            p95 = {name: percentile(s, 0.95) * 1e3 for name, s in samples.items()}
            print(f"  ratio p95 PG words+meaning / SQLite words+meaning: "
                  f"{p95['PG words+meaning'] / max(p95['words+meaning'], 1e-6):.2f}x "
                  "(target <= 2x)")
        for e in sides.values():
            e.shutdown()


if __name__ == "__main__":
    main()
