"""Webhook benchmark: signed requests per second and p95 latency, 1 and 20 conversations at once.

    python bench/bench_webhook.py [--runs 3] [--requests 200]
    python bench/bench_webhook.py --nodes 2    # 1 vs 2 nodes on one PostgreSQL (bench_nodes.py)

What runs: ``hermes-core serve``'s stack in this process (uvicorn + starlette on 127.0.0.1, the
dispatcher, one agent per conversation, the built-in file memory and session archive writing a real
state.db with ``synchronous=full``, the compressor engine), and a load generator in a child process
(httpx, one thread per conversation, each sending its messages one after another, every request
signed). The model is a **stub**: an in-process ChatLLM that answers with canned words at once, so
what is measured is everything but the model: HTTP, signature check, JSON, dispatch, the agent's
turn with its archive writes. Each run uses fresh conversation keys; each scenario sends
``--requests`` requests in total. Figures are medians over ``--runs`` runs.

Targets (Hermes publishes no gateway figures, perf-baseline.md has none): a real model turn takes
about a second or more, so the server's own share should stay a small part of it.

* p95 latency with 1 conversation <= 50 ms: 5% of a one-second model turn.
* throughput with 20 conversations >= 100 requests/s: 20 busy conversations driven by a real
  model produce at most ~20 turns/s; 5x headroom keeps the server from ever being the bottleneck.
* p95 latency with 20 conversations <= 250 ms: the 20 share 2 vCPUs with the client, and a turn
  must still add no more than a quarter of a model turn.

Nothing asserts; read the figures (ratio >= 1.0 means the target is met).

    python bench/bench_webhook.py --against DIR [--runs 4]

A/B against another checkout (DIR: its root, e.g. ``git archive BASE | tar -x -C DIR``): runs of
DIR's code (A) and this tree's (B) alternate, A B A B, each a fresh server process; printed are
each side's medians and B/A. Every request carries a fresh ``webhook-id``, so B pays for its
idempotency record (target for that: B's throughput with 20 conversations >= 95 % of A's).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SECRET = "bench-secret-0123456789abcdef0123"
TARGETS = {"p95_1": 50.0, "rps_20": 100.0, "p95_20": 250.0}
REPLY = "Noted: that is a fine plan, and I will remember the details you gave me."


# ------------------------------------------------------------------------------------ client


def client(url: str, conversations: int, per_conversation: int, prefix: str) -> None:
    """Child process: send the load, print latencies (ms) and wall time as JSON."""
    import httpx

    from hermes_core.plugins.platforms.webhook import signed_headers

    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Event()

    def talk(key: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            start.wait()
            for i in range(per_conversation):
                body = json.dumps({"conversation_key": key, "text": f"message {i} from {key}: "
                                   "please keep this plan in mind for later."}).encode()
                headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
                began = time.perf_counter()
                response = http.post("/messages", content=body, headers=headers)
                elapsed = (time.perf_counter() - began) * 1000
                with lock:
                    latencies.append(elapsed)
                    if response.status_code != 200:
                        failures.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=talk, args=(f"{prefix}-{n}",)) for n in range(conversations)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # every connection thread is ready before the clock starts
    began = time.perf_counter()
    start.set()
    for t in threads:
        t.join()
    print(json.dumps({"latencies": latencies, "seconds": time.perf_counter() - began,
                      "failures": failures[:5], "failed": len(failures)}))


# ------------------------------------------------------------------------------------ server


def start_server(home: Path) -> tuple[Any, Any, Any]:
    from hermes_core.config import parse_config_text
    from hermes_core.dispatch import connect_platform
    from hermes_core.host import PluginHost

    text = (f"memory:\n  providers: [file_memory, session_archive]\n  nudge_interval: 0\n"
            f"context:\n  engine: compressor\nwebhook:\n  secret: {SECRET}\n  port: 0\n"
            "  max_live_conversations: 64\n")
    config = parse_config_text(text, home / "config.yaml")
    host = PluginHost.load(home, config=config, entry_points=False, directories=False)
    from hermes_core.testing import CannedLLM
    from hermes_core.types import Usage

    # the only fake: the model's words, at once, streamed in small pieces when asked
    llm = CannedLLM(REPLY, usage=Usage(input_tokens=1200, output_tokens=20))
    platform, dispatcher = connect_platform(host, "webhook", llm=llm)
    return host, platform, dispatcher


def run_load(url: str, conversations: int, total: int, prefix: str) -> dict[str, Any]:
    per = max(1, total // conversations)
    out = subprocess.run(
        [sys.executable, __file__, "--client", url, "--conversations", str(conversations),
         "--per-conversation", str(per), "--prefix", prefix],
        check=True, capture_output=True, text=True, timeout=600,
    )
    data: dict[str, Any] = json.loads(out.stdout)
    if data["failed"]:
        raise SystemExit(f"{data['failed']} requests failed, e.g. {data['failures']}")
    return data


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]  # nearest rank


def compare(other: Path, runs: int, requests: int) -> None:
    """A (the checkout at ``other``) and B (this tree) alternately, one server process per run."""
    this = Path(__file__).resolve().parent.parent
    sides: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
    for _ in range(runs):
        for label, tree in (("A", other.resolve()), ("B", this)):
            env = {k: v for k, v in os.environ.items() if k != "HERMES_CORE_HOME"}
            env["PYTHONPATH"] = str(tree)
            out = subprocess.run([sys.executable, __file__, "--runs", "1", "--requests",
                                  str(requests), "--json"], env=env, check=True,
                                 capture_output=True, text=True, timeout=1200)
            sides[label].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"webhook A/B, A = {other}, B = this tree; {runs} runs each, alternating A B A B, "
          f"{requests} requests per scenario; medians")
    med = {label: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
           for label, rows in sides.items()}
    for label in ("A", "B"):
        print(f"  {label}: 20 conversations {med[label]['rps_20']:7.1f} requests/s   p95 1 conv "
              f"{med[label]['p95_1']:6.1f} ms   p95 20 conv {med[label]['p95_20']:6.1f} ms   (runs: "
              + ", ".join(f"{r['rps_20']:.0f}/s" for r in sides[label]) + ")")
    ratio = med["B"]["rps_20"] / med["A"]["rps_20"]
    print(f"  B/A throughput, 20 conversations: {ratio:.3f}   target >= 0.95   "
          f"ratio to target {ratio / 0.95:.2f}")


def main() -> None:
    if "--nodes" in sys.argv[1:]:  # several nodes sharing one database: bench_nodes.py
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench_nodes

        bench_nodes.main([a for a in sys.argv[1:]])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200, help="requests per scenario and run")
    parser.add_argument("--client", metavar="URL")
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--per-conversation", type=int, default=10)
    parser.add_argument("--prefix", default="c")
    parser.add_argument("--json", action="store_true", help="print the medians as JSON only")
    parser.add_argument("--against", metavar="DIR", help="A/B against the checkout at DIR")
    args = parser.parse_args()
    if args.client:
        client(args.client, args.conversations, args.per_conversation, args.prefix)
        return
    if args.against:
        compare(Path(args.against), args.runs, args.requests)
        return

    logging.basicConfig(level=logging.WARNING)
    results: dict[int, list[tuple[float, float, float]]] = {1: [], 20: []}
    with tempfile.TemporaryDirectory(prefix="hermes-bench-webhook-") as tmp:
        os.environ["HERMES_CORE_HOME"] = tmp
        host, platform, dispatcher = start_server(Path(tmp))
        try:
            run_load(platform.url, 2, 20, "warmup")
            for run in range(args.runs):
                for conversations in (1, 20):
                    data = run_load(platform.url, conversations, args.requests,
                                    f"r{run}-n{conversations}")
                    lat = data["latencies"]
                    results[conversations].append(
                        (len(lat) / data["seconds"], statistics.median(lat), p95(lat)))
        finally:
            from hermes_core.dispatch import disconnect_platform

            disconnect_platform(host, platform, dispatcher)
            host.shutdown()

    if args.json:
        print(json.dumps({
            "rps_20": statistics.median(r[0] for r in results[20]),
            "p95_1": statistics.median(r[2] for r in results[1]),
            "p95_20": statistics.median(r[2] for r in results[20])}))
        return
    print(f"webhook, stub LLM (in-process, canned words), loopback, {args.runs} runs x "
          f"{args.requests} requests per scenario; medians of the runs")
    for conversations, rows in results.items():
        rps = statistics.median(r[0] for r in rows)
        p50 = statistics.median(r[1] for r in rows)
        p95_ms = statistics.median(r[2] for r in rows)
        print(f"  {conversations:2d} conversation(s) at once: {rps:7.1f} requests/s   "
              f"p50 {p50:6.1f} ms   p95 {p95_ms:6.1f} ms   (runs: "
              + ", ".join(f"{r[0]:.0f}/s p95 {r[2]:.0f}" for r in rows) + ")")
    p95_1 = statistics.median(r[2] for r in results[1])
    rps_20 = statistics.median(r[0] for r in results[20])
    p95_20 = statistics.median(r[2] for r in results[20])
    print("targets (ratio >= 1.0 means met):")
    print(f"  p95 latency, 1 conversation   {p95_1:7.1f} ms  target <= {TARGETS['p95_1']:.0f} ms  "
          f"ratio {TARGETS['p95_1'] / p95_1:.2f}")
    print(f"  throughput, 20 conversations  {rps_20:7.1f} /s  target >= {TARGETS['rps_20']:.0f} /s  "
          f"ratio {rps_20 / TARGETS['rps_20']:.2f}")
    print(f"  p95 latency, 20 conversations {p95_20:7.1f} ms  target <= {TARGETS['p95_20']:.0f} ms  "
          f"ratio {TARGETS['p95_20'] / p95_20:.2f}")


if __name__ == "__main__":
    main()
