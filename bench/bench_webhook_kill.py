"""kill -9 of a ``serve`` node mid-load, clients retrying on the other node: lost, duplicated, order.

    python bench/bench_webhook_kill.py [--clients 24] [--messages 15] [--url postgresql://...]

Two real ``hermes-core serve`` processes share one PostgreSQL database (a throwaway server is
started unless ``--url`` is given). ``--clients`` conversations each send ``--messages`` messages,
one after another, to the first node, every message with its own ``webhook-id``. Once a third of
the load is answered, the first node is killed with SIGKILL while turns are in flight. A client
whose request fails (the connection dropped, or a 5xx) sends the same message again, re-signed with
a new timestamp and the same ``webhook-id``, to the second node, as the docs tell clients to; a 202
``in_progress`` is retried a moment later. The model is the loopback Messages API server (a stub
that echoes the message after ``--latency`` seconds, so that turns are in flight when the node
dies).

Printed: messages sent, answered, lost (never answered), stored user messages, duplicated (stored
more than once), conversations whose stored order differs from the order sent, and two user
messages in a row. Target: 0 lost, 0 duplicated, 0 out of order. Nothing asserts.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# the serve processes: the test suite's helper (one home each, the shared storage URL, the
# listening URL read from the process's output, kill -9 and stop by PID)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serve_nodes import SECRET, ServeNode


def node_config(api_url: str) -> str:
    from serve_nodes import node_config as plain

    return plain(api_url, "  max_pending_per_conversation: 4\n")


class Stamps:
    """Signing timestamps never used twice (the replay guard refuses the same signed bytes)."""

    def __init__(self) -> None:
        self.last = 0
        self.lock = threading.Lock()

    def next(self) -> int:
        with self.lock:
            self.last = max(int(time.time()), self.last + 1)
            return self.last


def deliver(urls: Callable[[], list[str]], key: str, text: str, msg_id: str, stamps: Stamps,
            *, deadline: float) -> str | None:
    """Send one message until it is answered: the first node first, then the others; the reply,
    or None when ``deadline`` passed."""
    import httpx

    from hermes_core.plugins.platforms.webhook import signed_headers

    body = json.dumps({"conversation_key": key, "text": text}).encode()
    attempt = 0
    while time.monotonic() < deadline:
        candidates = urls()
        url = candidates[0] if attempt == 0 else candidates[-1]  # retries: the other node
        headers = {"Content-Type": "application/json",
                   **signed_headers(SECRET, body, msg_id=msg_id, timestamp=stamps.next())}
        attempt += 1
        try:
            response = httpx.post(f"{url}/messages", content=body, headers=headers, timeout=60)
        except httpx.HTTPError:
            continue  # the node is gone: the next attempt goes to another
        if response.status_code == 200:
            return str(response.json()["reply"])
        if response.status_code in (202, 429) or response.status_code >= 500:
            threading.Event().wait(0.2)  # a client's back-off before its retry
            continue
        raise RuntimeError(f"{key} {msg_id}: {response.status_code} {response.text[:200]}")
    return None


def stored_users(storage_url: str) -> dict[str, list[tuple[str, str]]]:
    """conversation key -> [(role, content)] in storage order (user and assistant only)."""
    from hermes_core.storage import close_pools, parse_storage_url
    from hermes_core.storage.pool import get_pool

    pool: Any = get_pool(parse_storage_url(storage_url))
    with pool.connection() as con:
        rows = con.execute(
            "SELECT (s.attributes::jsonb) ->> 'conversation_key', m.role, m.content "
            "FROM messages AS m JOIN sessions AS s ON s.num = m.session "
            "WHERE m.role IN ('user', 'assistant') ORDER BY m.id").fetchall()
    close_pools()
    out: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for key, role, content in rows:
        out[key].append((role, content))
    return out


def run(storage_url: str, work: Path, *, clients: int, messages: int,
        latency: float) -> dict[str, int]:
    """The whole scenario; returns the counts (see the module docstring)."""
    from hermes_core.testing import MessagesAPIServer, Reply

    active = [0]
    answered = [0]
    lock = threading.Lock()

    def model(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(
            b.get("text", "") for b in last if isinstance(b, dict))
        with lock:
            active[0] += 1
        try:
            threading.Event().wait(latency)  # the model "thinking": turns stay in flight
            return Reply(text=f"re: {text.strip()[:80]}")
        finally:
            with lock:
                active[0] -= 1

    stamps = Stamps()
    replies: dict[str, list[str | None]] = {}
    with MessagesAPIServer(model) as api:
        nodes = [ServeNode(work / f"node-{i}", storage_url, api.base_url,
                           config=node_config(api.base_url)) for i in range(2)]
        alive = [nodes[0].url, nodes[1].url]
        try:
            deadline = time.monotonic() + 600

            def talk(n: int) -> None:
                key = f"conv-{n:02d}"
                got: list[str | None] = []
                for i in range(messages):
                    got.append(deliver(lambda: list(alive), key, f"{key} message {i}",
                                       f"msg_{key}_{i}", stamps, deadline=deadline))
                    with lock:
                        answered[0] += 1
                replies[key] = got

            threads = [threading.Thread(target=talk, args=(n,)) for n in range(clients)]
            for t in threads:
                t.start()
            third = clients * messages // 3
            waiting = threading.Event()
            while time.monotonic() < deadline:  # a third answered and turns in flight: kill
                with lock:
                    if answered[0] >= third and active[0] > 0:
                        break
                waiting.wait(0.01)
            nodes[0].kill()
            alive.pop(0)
            for t in threads:
                t.join(600)
        finally:
            for node in nodes:
                node.stop()
    stored = stored_users(storage_url)
    sent = clients * messages
    lost = sum(1 for got in replies.values() for r in got if r is None) + (
        sent - sum(len(g) for g in replies.values()))
    users = duplicated = out_of_order = users_in_a_row = 0
    for n in range(clients):
        key = f"conv-{n:02d}"
        rows = stored.get(key, [])
        texts = [c for role, c in rows if role == "user"]
        users += len(texts)
        counts = collections.Counter(texts)
        duplicated += sum(c - 1 for c in counts.values() if c > 1)
        first_seen = list(dict.fromkeys(texts))
        if first_seen != [f"{key} message {i}" for i in range(messages)]:
            out_of_order += 1
        users_in_a_row += sum(1 for a, b in itertools.pairwise(rows)
                              if a[0] == b[0] == "user")
    return {"sent": sent, "answered": sent - lost, "lost": lost, "stored_user_messages": users,
            "duplicated": duplicated, "conversations_out_of_order": out_of_order,
            "user_messages_in_a_row": users_in_a_row}


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from hermes_core.testing.postgres import temp_postgres

    with temp_postgres() as server:
        yield server.url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=24)
    parser.add_argument("--messages", type=int, default=15)
    parser.add_argument("--latency", type=float, default=0.3, help="the stub model's seconds")
    parser.add_argument("--url", help="a PostgreSQL database to use (default: a throwaway one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hermes-bench-kill-") as tmp, \
            database(args.url) as url:
        began = time.perf_counter()
        counts = run(url, Path(tmp), clients=args.clients, messages=args.messages,
                     latency=args.latency)
        seconds = time.perf_counter() - began
    print(f"kill -9 of node 1 of 2 (PostgreSQL), {args.clients} clients x {args.messages} "
          f"messages, retries re-signed to node 2 with the same webhook-id ({seconds:.0f} s)")
    for name, value in counts.items():
        print(f"  {name.replace('_', ' '):28s} {value}")
    bad = counts["lost"] + counts["duplicated"] + counts["conversations_out_of_order"]
    print(f"target: 0 lost, 0 duplicated, 0 out of order -> {'met' if bad == 0 else 'NOT met'}")


if __name__ == "__main__":
    main()
