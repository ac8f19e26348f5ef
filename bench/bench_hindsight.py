"""Hindsight provider benchmark against a real hindsight-api server on 127.0.0.1.

What it measures (medians; nothing asserts, the machine is shared and noisy):

* **prefetch served from cache**: ``prefetch`` after ``queue_prefetch`` prepared the same query;
  this is what a turn pays. Target < 1 ms (no I/O), far inside memory.prefetch_timeout (300 ms).
* **recall round trip**: ``HindsightClient.recall`` (HTTP, the server embeds the query with MiniLM
  through the TEI server, searches pgvector + BM25 + graph, fuses with rrf). Target < 180 ms: the
  share of the 300 ms deadline prefetch may spend on a live recall (``prefetch_live_wait``).
* **sync_turn**: what one call costs the provider's own background lane, where the kernel runs it
  off the turn: the turn is kept in the spool, then its retain is sent (an HTTP round trip). No
  target: the turn does not wait for it (the kernel's hand-off is in bench_agent.py's turn
  overhead); it bounds how fast one conversation's retains go out, which the throughput below
  measures against its target. (Before the retains went through the kernel's spool, sync_turn
  only queued a job for a writer thread, and this figure had a 1 ms target.)
* **retain throughput**: turns handed to the provider until the server acknowledged them all
  (async retains) — target >= 20 turns/s, far above a conversation's pace — and until the server
  finished processing them (fact extraction with the ``mock`` LLM, embeddings, consolidation),
  reported without a target.

Ratios: for times, figure / target (<= 1.0 meets it); for throughput, figure / target (>= 1.0).

Run it with the server virtualenv that ``tox -e hindsight`` builds (or build one with
``python -m hermes_core_hindsight.localserver ensure-venv DIR``), in an environment where
hermes-core and hermes-core-hindsight are installed::

    python bench/bench_hindsight.py --venv .tox/hindsight-server        # starts and stops a server
    python bench/bench_hindsight.py --base-url http://127.0.0.1:8888    # uses a running server
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from hermes_core_hindsight import HindsightMemory
from hermes_core_hindsight.localserver import HindsightStack

from hermes_core.testing import isolated_home, make_instance
from hermes_core.types import Message, Session, SwitchReason

TARGET_PREFETCH_MS = 1.0
TARGET_RECALL_MS = 180.0
TARGET_ACK_TURNS_PER_S = 20.0

TOPICS = [
    "I fixed the database hang by raising the connection pool size to {n}.",
    "We deploy the billing service every Tuesday at {n}:00.",
    "The cat knocked a glass of water off the kitchen table on day {n}.",
    "My editor is Helix with {n} custom keybindings.",
    "The nightly ETL loads {n} million shipment events from S3.",
]
QUERIES = ["how did I solve the timeout", "when do we ship invoices code", "which text editor do I use",
           "animal broke something", "how big is the nightly load"]


def report(label: str, value: float, unit: str, target: float | None = None,
           higher_is_better: bool = False) -> None:
    ratio = ""
    if target:
        sign = ">=" if higher_is_better else "<"
        ratio = f"  ratio to target {value / target:.2f} (target {sign} {target:g} {unit})"
    print(f"{label:<52} {value:10.3f} {unit}{ratio}", flush=True)


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def run(base_url: str, api_key: str | None, turns: int, reps: int) -> None:
    bank = "bench-" + uuid.uuid4().hex[:8]
    config = f"hindsight:\n  base_url: {base_url}\n  bank: {bank}\n"
    if api_key:
        config += f"  api_key: {api_key}\n"
    with isolated_home() as home:
        provider: HindsightMemory = make_instance(HindsightMemory, "memory-provider", home,
                                                  config=config)
        session = Session(id="bench-1", platform="bench")
        provider.on_session_switch(session, None, SwitchReason.NEW)

        # sync_turn cost and acknowledged throughput
        history: list[Message] = []
        costs = []
        start = time.perf_counter()
        for n in range(turns):
            user = Message("user", TOPICS[n % len(TOPICS)].format(n=n))
            assistant = Message("assistant", f"Noted ({n}).")
            history += [user, assistant]
            t = time.perf_counter()
            provider.sync_turn(user, assistant, session, list(history))
            costs.append(time.perf_counter() - t)
        flushed = provider.retains.wait_idle(300) and not provider.retains.spool.has_pending()
        acked = time.perf_counter() - start
        settled = provider.settle(600)
        processed = time.perf_counter() - start
        if not (flushed and settled):
            print("warning: the server did not finish within the bound; figures are partial")
        report("sync_turn on the provider's lane (median)", ms(costs), "ms")
        report(f"retain: {turns} turns acknowledged", turns / acked, "turns/s",
               TARGET_ACK_TURNS_PER_S, higher_is_better=True)
        report(f"retain: {turns} turns processed by the server", turns / processed, "turns/s")

        # recall round trip
        later = Session(id="bench-2", platform="bench")
        provider.on_session_switch(later, session, SwitchReason.NEW)
        types = provider.recall_types()
        samples = []
        hits = 0
        for _ in range(reps):
            for query in QUERIES:
                t = time.perf_counter()
                found = provider.client.recall(bank, query, types=types)
                samples.append(time.perf_counter() - t)
                hits += bool(found)
        report(f"recall round trip (median of {len(samples)})", ms(samples), "ms", TARGET_RECALL_MS)
        samples.sort()
        report("recall round trip (p95)", samples[int(len(samples) * 0.95) - 1] * 1000, "ms")

        # prefetch served from what queue_prefetch prepared
        cached = []
        for _ in range(reps):
            for query in QUERIES:
                provider.queue_prefetch(query, later)
                provider.prefetcher.idle(10)
                t = time.perf_counter()
                text = provider.prefetch(query, later)
                cached.append(time.perf_counter() - t)
                assert text, f"nothing recalled for {query!r}"
        report(f"prefetch from cache (median of {len(cached)})", ms(cached), "ms",
               TARGET_PREFETCH_MS)
        provider.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--venv", type=Path, help="server virtualenv: start a server for the run")
    where.add_argument("--base-url", help="use the hindsight-api already running here")
    parser.add_argument("--api-key", help="for --base-url servers that require one")
    parser.add_argument("--llm", choices=["mock", "none"], default="mock")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.base_url:
        run(args.base_url, args.api_key, args.turns, args.reps)
        return
    with tempfile.TemporaryDirectory():
        started = time.perf_counter()
        with HindsightStack(args.venv.resolve(), llm=args.llm) as stack:
            report("server stack start-up, to /health ready", time.perf_counter() - started, "s")
            print(f"  per part (s): {stack.timings()}")
            print(f"  RSS at start (MB): {stack.memory()}")
            run(stack.base_url, None, args.turns, args.reps)
            print(f"  RSS after the run (MB): {stack.memory()}")


if __name__ == "__main__":
    main()
