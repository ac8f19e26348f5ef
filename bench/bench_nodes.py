"""Webhook throughput with one and with two nodes sharing one PostgreSQL storage.url.

    python bench/bench_webhook.py --nodes 2 [--runs 3] [--requests 200]
    python bench/bench_nodes.py [--runs 3] [--requests 200] [--url postgresql://...]
    python bench/bench_nodes.py --llm-latency 0       # the model answers at once (CPU-bound)

Each node is its own process (``hermes-core serve``'s stack: uvicorn + starlette, the dispatcher,
the file memory and the session archive on PostgreSQL, the compressor; no embedder, so no
background indexing competes for the CPU), with a **stub** model:
an in-process CannedLLM whose every call takes ``--llm-latency`` seconds (default 1.0, about what
a short answer from a hosted model takes; it sleeps, as a thread waiting for a model's answer over
the network does) and then answers canned words.
Each node runs at most ``--max-turns`` turns at once (``webhook.max_concurrent_turns``, default
8): a node's capacity is its number of model calls in flight, as with a real model. A throwaway
PostgreSQL server is started unless ``--url`` names a database. The load generator (a child
process, one thread per conversation, every request signed) sends 20 conversations at once; with
two nodes each conversation alternates between them, so every turn takes the conversation's
lock in the database and loads the stored history. Figures are medians over ``--runs`` runs; the
nodes' own CPU time per request is printed too (from /proc).

Why a latency: with a model that answers in zero time, a turn is pure CPU (HTTP, JSON, prompt,
archive writes), and on a 2-vCPU machine that also runs the load generator and the database, one
node already uses most of what CPU there is, so a second node mostly adds contention. The bench
prints the CPU per request of the nodes, the client and (with its own throwaway server) the
database, and from their sum the most any number of nodes could serve on this machine: with
``--llm-latency 0`` that ceiling, not the nodes, bounds the ratio. A real model call takes a second
or more, during which the node waits; that wait is what a second node multiplies.

Target: two nodes >= 1.6x one node's throughput; nothing asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
CLIENT_CPU: list[float] = []
REPLY = "Noted: that is a fine plan, and I will remember the details you gave me."


def node_main(home: str, latency: float, max_turns: int) -> None:
    """Child process: one node; prints its URL, serves until stdin closes."""
    from hermes_core.config import parse_config_text
    from hermes_core.dispatch import connect_platform, disconnect_platform
    from hermes_core.host import PluginHost
    from hermes_core.types import Usage

    text = (f"memory:\n  providers: [file_memory, session_archive]\n  nudge_interval: 0\n"
            f"context:\n  engine: compressor\nembeddings:\n  embedder: none\n"
            f"webhook:\n  secret: {SECRET}\n  port: 0\n"
            f"  max_live_conversations: 64\n  max_concurrent_turns: {max_turns}\n")
    config = parse_config_text(text, Path(home) / "config.yaml")
    host = PluginHost.load(Path(home), config=config, entry_points=False, directories=False)
    llm = slow_llm(REPLY, usage=Usage(input_tokens=1200, output_tokens=20), latency=latency)
    platform, dispatcher = connect_platform(host, "webhook", llm=llm)
    print(platform.url, flush=True)
    sys.stdin.read()  # until the parent closes it
    disconnect_platform(host, platform, dispatcher)
    host.shutdown()


def _slow_llm_class() -> type:
    from hermes_core.testing import CannedLLM

    class SlowLLM(CannedLLM):
        """CannedLLM whose every call first waits ``latency`` seconds, as a model call does."""

        def __init__(self, *args: Any, latency: float = 0.0, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.latency = latency

        def respond(self, **kwargs: Any) -> Any:
            if self.latency:
                time.sleep(self.latency)  # stands for waiting on the network: the GIL is free
            return super().respond(**kwargs)

    return SlowLLM


def slow_llm(text: str, *, usage: Any, latency: float) -> Any:
    """A CannedLLM answering ``text`` after ``latency`` seconds per call."""
    return _slow_llm_class()(text, usage=usage, latency=latency)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process, its live descendants and the children it has reaped (the
    database: the postmaster, its backends and the backends that have exited)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += cpu_seconds(current)
        todo.extend(children.get(current, []))
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        pass
    return total


def client_main(urls: list[str], conversations: int, per: int, prefix: str) -> None:
    """Child process: the load; conversation n's message i goes to node (n + i) % len(urls).

    Plain ``http.client`` keep-alive connections: the load generator shares the machine's cores
    with the nodes and the database, so it should cost as little CPU per request as it can
    (an httpx client cost ~6 ms of CPU per request here, about as much as a node's turn)."""
    import http.client
    from urllib.parse import urlsplit

    from hermes_core.plugins.platforms.webhook import signed_headers

    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start = threading.Event()
    addresses = [urlsplit(u) for u in urls]

    def talk(n: int) -> None:
        key = f"{prefix}-{n}"
        connections = [http.client.HTTPConnection(a.hostname or "127.0.0.1", a.port, timeout=120)
                       for a in addresses]
        start.wait()
        for i in range(per):
            body = json.dumps({"conversation_key": key, "text": f"message {i} from {key}: "
                               "please keep this plan in mind for later."}).encode()
            headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
            connection = connections[(n + i) % len(connections)]
            began = time.perf_counter()
            connection.request("POST", "/messages", body=body, headers=headers)
            response = connection.getresponse()
            text = response.read()
            with lock:
                latencies.append((time.perf_counter() - began) * 1000)
                if response.status != 200:
                    failures.append(f"{response.status} {text[:200]!r}")
        for c in connections:
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
    def __init__(self, home: Path, url: str, latency: float, max_turns: int) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url}
        self.proc = subprocess.Popen([sys.executable, __file__, "--node", str(home),
                                      "--llm-latency", str(latency), "--max-turns",
                                      str(max_turns)], env=env,
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
    """Requests per second; the client's CPU seconds are added to ``CLIENT_CPU``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, __file__, "--client", ",".join(urls), "--conversations",
         str(conversations), "--per", str(max(1, requests // conversations)), "--prefix",
         prefix], check=True, capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CLIENT_CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    data: dict[str, Any] = json.loads(out.stdout)
    if data["failed"]:
        raise SystemExit(f"{data['failed']} requests failed, e.g. {data['failures']}")
    return len(data["latencies"]) / data["seconds"]


def run(url: str, runs: int, requests: int, latency: float, max_turns: int,
        db_pid: int | None = None) -> None:
    rates: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[float]] = {1: [], 2: []}
    other: dict[int, list[tuple[float, float]]] = {1: [], 2: []}  # client, database per request
    with tempfile.TemporaryDirectory(prefix="hermes-bench-nodes-") as tmp:
        nodes = [Node(Path(tmp) / f"node-{i}", url, latency, max_turns) for i in range(2)]
        try:
            load([nodes[0].url, nodes[1].url], 40, f"warmup-{latency}")
            for r in range(runs):  # A B A B: one node, then two, in each run
                for count in (1, 2):
                    before = sum(cpu_seconds(n.proc.pid) for n in nodes[:count])
                    db_before = tree_cpu_seconds(db_pid) if db_pid else 0.0
                    rates[count].append(load([n.url for n in nodes[:count]], requests,
                                             f"r{r}-{count}-{latency}"))
                    used = sum(cpu_seconds(n.proc.pid) for n in nodes[:count]) - before
                    db_used = tree_cpu_seconds(db_pid) - db_before if db_pid else 0.0
                    cpu[count].append(1000 * used / requests)
                    other[count].append((1000 * CLIENT_CPU[-1] / requests,
                                         1000 * db_used / requests))
        finally:
            for node in nodes:
                node.stop()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    what = (f"stub LLM taking {latency:g} s per call" if latency else
            "stub LLM answering at once (CPU-bound)")
    print(f"webhook on PostgreSQL, {what}, at most {max_turns} turns at once per node, "
          f"20 conversations, {runs} runs x {requests} requests; medians")
    for count, rate in ((1, one), (2, two)):
        print(f"  {count} node{'s' if count > 1 else ' '}: {rate:7.1f} requests/s  (runs: "
              f"{', '.join(f'{x:.0f}' for x in rates[count])}); node CPU "
              f"{statistics.median(cpu[count]):.1f} ms per request, client "
              f"{statistics.median(c for c, _ in other[count]):.1f} ms"
              + (f", database {statistics.median(d for _, d in other[count]):.1f} ms"
                 if db_pid else ""))
    if not latency:  # at the two-node run's CPU per request (the run that fills the cores)
        used = (statistics.median(cpu[2]) + statistics.median(c for c, _ in other[2])
                + (statistics.median(d for _, d in other[2]) if db_pid else 0.0))
        cores = os.cpu_count() or 1
        print(f"  CPU per request with two nodes, all processes: {used:.1f} ms; {cores} cores "
              f"serve at most {1000 * cores / used:.0f} requests/s at that cost, "
              f"{1000 * cores / used / one:.2f}x one node's figure")
    ratio = two / one
    print(f"  2 nodes / 1 node = {ratio:.2f}x, target >= {TARGET_RATIO}x: ratio to target "
          f"{ratio / TARGET_RATIO:.2f} ({'met' if ratio >= TARGET_RATIO else 'MISS'})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--url", help="a PostgreSQL database (default: a throwaway server)")
    parser.add_argument("--llm-latency", type=float, default=1.0,
                        help="seconds each stub model call takes (default 1.0; 0: at once)")
    parser.add_argument("--max-turns", type=int, default=8,
                        help="turns a node runs at once (webhook.max_concurrent_turns; default 8)")
    parser.add_argument("--cpu-bound", action="store_true",
                        help="also measure with a stub that answers at once, in the same run")
    parser.add_argument("--node", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--conversations", type=int, default=20, help=argparse.SUPPRESS)
    parser.add_argument("--per", type=int, default=10, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", default="c", help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.node:
        node_main(args.node, args.llm_latency, args.max_turns)
        return
    if args.client:
        client_main(args.client.split(","), args.conversations, args.per, args.prefix)
        return
    latencies = [args.llm_latency, *([0.0] if args.cpu_bound and args.llm_latency else [])]
    if args.url:
        for latency in latencies:
            run(args.url, args.runs, args.requests, latency, args.max_turns)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from hermes_core.testing.postgres import temp_postgres

    with temp_postgres() as server:
        for latency in latencies:
            run(server.url, args.runs, args.requests, latency, args.max_turns,
                db_pid=server.pid)


if __name__ == "__main__":
    main()
