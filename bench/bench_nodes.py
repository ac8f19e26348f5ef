"""Webhook throughput with one and with two nodes sharing one PostgreSQL storage.url.

    python bench/bench_webhook.py --nodes 2 [--runs 3] [--requests 200]
    python bench/bench_nodes.py [--runs 3] [--requests 200] [--url postgresql://...]

Each node is its own process (``hermes-core serve``'s stack: uvicorn + starlette, the dispatcher,
the file memory and the session archive on PostgreSQL, the compressor), with a **stub** model:
the in-process CannedLLM answering at once, as in bench_webhook.py. A throwaway PostgreSQL server
is started unless ``--url`` names a database. The load generator (a child process, one thread per
conversation, every request signed) sends 20 conversations at once; with two nodes each
conversation alternates between them, so every turn takes the conversation's lock in the
database and loads the stored history. Figures are medians over ``--runs`` runs.

Target: two nodes >= 1.6x one node's throughput. The machine has 2 vCPUs shared by the client,
the nodes and the database server, so the ratio shows contention as much as scaling; nothing
asserts.
"""

from __future__ import annotations

import argparse
import json
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
TARGET_RATIO = 1.6
REPLY = "Noted: that is a fine plan, and I will remember the details you gave me."


def node_main(home: str) -> None:
    """Child process: one node; prints its URL, serves until stdin closes."""
    from hermes_core.config import parse_config_text
    from hermes_core.dispatch import connect_platform, disconnect_platform
    from hermes_core.host import PluginHost
    from hermes_core.testing import CannedLLM
    from hermes_core.types import Usage

    text = (f"memory:\n  providers: [file_memory, session_archive]\n  nudge_interval: 0\n"
            f"context:\n  engine: compressor\nwebhook:\n  secret: {SECRET}\n  port: 0\n"
            "  max_live_conversations: 64\n")
    config = parse_config_text(text, Path(home) / "config.yaml")
    host = PluginHost.load(Path(home), config=config, entry_points=False, directories=False)
    llm = CannedLLM(REPLY, usage=Usage(input_tokens=1200, output_tokens=20))
    platform, dispatcher = connect_platform(host, "webhook", llm=llm)
    print(platform.url, flush=True)
    sys.stdin.read()  # until the parent closes it
    disconnect_platform(host, platform, dispatcher)
    host.shutdown()


def client_main(urls: list[str], conversations: int, per: int, prefix: str) -> None:
    """Child process: the load; conversation n's message i goes to node (n + i) % len(urls)."""
    import httpx

    from hermes_core.plugins.platforms.webhook import signed_headers

    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Event()

    def talk(n: int) -> None:
        key = f"{prefix}-{n}"
        clients = [httpx.Client(base_url=u, timeout=120) for u in urls]
        start.wait()
        for i in range(per):
            body = json.dumps({"conversation_key": key, "text": f"message {i} from {key}: "
                               "please keep this plan in mind for later."}).encode()
            headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
            began = time.perf_counter()
            response = clients[(n + i) % len(clients)].post("/messages", content=body,
                                                            headers=headers)
            with lock:
                latencies.append((time.perf_counter() - began) * 1000)
                if response.status_code != 200:
                    failures.append(f"{response.status_code} {response.text[:200]}")
        for c in clients:
            c.close()

    threads = [threading.Thread(target=talk, args=(n,)) for n in range(conversations)]
    for t in threads:
        t.start()
    time.sleep(0.2)  # every thread is ready before the clock starts
    began = time.perf_counter()
    start.set()
    for t in threads:
        t.join()
    print(json.dumps({"latencies": latencies, "seconds": time.perf_counter() - began,
                      "failed": len(failures), "failures": failures[:3]}))


class Node:
    def __init__(self, home: Path, url: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url}
        self.proc = subprocess.Popen([sys.executable, __file__, "--node", str(home)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise SystemExit("a node did not start")

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def load(urls: list[str], requests: int, prefix: str, conversations: int = 20) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--client", ",".join(urls), "--conversations",
         str(conversations), "--per", str(max(1, requests // conversations)), "--prefix",
         prefix], check=True, capture_output=True, text=True, timeout=900)
    data: dict[str, Any] = json.loads(out.stdout)
    if data["failed"]:
        raise SystemExit(f"{data['failed']} requests failed, e.g. {data['failures']}")
    return len(data["latencies"]) / data["seconds"]


def run(url: str, runs: int, requests: int) -> None:
    rates: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="hermes-bench-nodes-") as tmp:
        nodes = [Node(Path(tmp) / f"node-{i}", url) for i in range(2)]
        try:
            load([nodes[0].url, nodes[1].url], 40, "warmup")
            for r in range(runs):
                rates[1].append(load([nodes[0].url], requests, f"r{r}-one"))
                rates[2].append(load([n.url for n in nodes], requests, f"r{r}-two"))
        finally:
            for node in nodes:
                node.stop()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"webhook on PostgreSQL, stub LLM, 20 conversations, {runs} runs x {requests} requests;"
          " medians")
    print(f"  1 node : {one:7.1f} requests/s  (runs: {', '.join(f'{x:.0f}' for x in rates[1])})")
    print(f"  2 nodes: {two:7.1f} requests/s  (runs: {', '.join(f'{x:.0f}' for x in rates[2])}),"
          " each conversation alternating between them")
    ratio = two / one
    print(f"  2 nodes / 1 node = {ratio:.2f}x, target >= {TARGET_RATIO}x: ratio to target "
          f"{ratio / TARGET_RATIO:.2f} ({'met' if ratio >= TARGET_RATIO else 'MISS'})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--url", help="a PostgreSQL database (default: a throwaway server)")
    parser.add_argument("--node", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--conversations", type=int, default=20, help=argparse.SUPPRESS)
    parser.add_argument("--per", type=int, default=10, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", default="c", help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.node:
        node_main(args.node)
        return
    if args.client:
        client_main(args.client.split(","), args.conversations, args.per, args.prefix)
        return
    if args.url:
        run(args.url, args.runs, args.requests)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from hermes_core.testing.postgres import temp_postgres

    with temp_postgres() as server:
        run(server.url, args.runs, args.requests)


if __name__ == "__main__":
    main()
