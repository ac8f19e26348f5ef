"""``hermes-core inspect``: API latency over real HTTP on 127.0.0.1, and the page's weight.

Builds a scratch home: an archive of ``--messages`` messages (the seeded corpus of
bench/session_corpus.py, default 100,000) plus one session of 200 messages, and a MEMORY.md /
USER.md of 20 entries each; serves the inspector on a real uvicorn server (the same app as
``hermes-core inspect``) and times, from an HTTP client with the bearer token:

* ``GET /api/memory`` (target p95 <= 50 ms),
* ``GET /api/sessions/<id>?limit=200``, a 200-message session page (p95 <= 100 ms),
* ``GET /api/search?q=...``, the session_search tool's search over the whole archive
  (p95 <= 150 ms; by words: the bench sets ``embeddings.embedder: none`` so no model is needed;
  with an embedder the meaning path adds its own cost, measured by bench_archive_semantic.py),

rounds interleaved (memory, session, search, memory, ...), and the page: HTML + CSS + JS bytes
(target <= 300 KB) and whether it names any external URL. Prints p50/p95, the ratio of each p95
to its target and the load average (other work on the machine moves the figures).

    python bench/bench_inspect.py [--messages 100000] [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from session_corpus import Corpus

from hermes_core.types import Message

TARGETS_MS = {"memory read": 50.0, "session page (200 msgs)": 100.0, "search": 150.0}
PAGE_TARGET = 300 * 1024


def build_home(home: Path, messages: int) -> tuple[str, list[str]]:
    """The archive and the memory; returns the 200-message session's id and search queries."""
    from hermes_core.plugins.memory.session_archive import SessionArchive

    (home / "config.yaml").write_text("embeddings:\n  embedder: none\n", encoding="utf-8")
    corpus = Corpus()
    queries: list[str] = []
    stored = 0
    started = time.perf_counter()
    with SessionArchive(home / "state.db", synchronous="normal") as archive:
        for sid, msgs in corpus.sessions():
            archive.append_messages(sid, msgs)
            stored += len(msgs)
            if len(queries) < 50:
                words = [w for w in msgs[0].content.split() if w.isalpha() and len(w) > 4]
                if len(words) >= 2:
                    queries.append(" ".join(words[:2]))
            if stored >= messages:
                break
        long_id = "bench-inspect-200"
        archive.append_messages(long_id, [Message("user" if i % 2 == 0 else "assistant",
                                                  f"message {i} of the long session about "
                                                  "shipment events and nightly loads")
                                          for i in range(200)])
    print(f"archive: {stored + 200:,} messages written in {time.perf_counter() - started:.1f} s")
    from hermes_core.cli import cli

    for target in ("memory", "user"):
        for i in range(20):
            cli.main(["memory", "add", "--target", target, f"{target} fact number {i}: the "
                      f"depot in zone {i} loads at {i:02d}:00"], standalone_mode=False)
    return long_id, queries


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["HERMES_CORE_HOME"] = str(home)
        os.environ.pop("HERMES_CORE_STORAGE_URL", None)
        os.environ.pop("HERMES_CORE_MCP_TOKEN", None)
        long_id, queries = build_home(home, args.messages)

        from hermes_core.bearer import resolve
        from hermes_core.commands import load_host
        from hermes_core.plugins.inspect.api import build_app, page_html
        from hermes_core.plugins.inspect.auth import Gate
        from hermes_core.plugins.inspect.serve import start_thread
        from hermes_core.plugins.inspect.service import Inspector

        host = load_host()
        host.activate_memory_providers()
        credential, token = resolve(home, "HERMES_CORE_MCP_TOKEN")
        inspector = Inspector(host)
        running = start_thread(build_app(inspector, Gate(credential, home)))
        timings: dict[str, list[float]] = {k: [] for k in TARGETS_MS}
        try:
            with httpx.Client(base_url=running.url, timeout=60,
                              headers={"Authorization": f"Bearer {token}"}) as http:
                requests = {
                    "memory read": lambda n: http.get("/api/memory"),
                    "session page (200 msgs)": lambda n: http.get(
                        f"/api/sessions/{long_id}", params={"limit": 200}),
                    "search": lambda n: http.get("/api/search",
                                                 params={"q": queries[n % len(queries)]}),
                }
                for name, call in requests.items():  # warm: first queries, caches, connections
                    for n in range(5):
                        assert call(n).status_code == 200, (name, call(n).text[:300])
                for n in range(args.rounds):
                    for name, call in requests.items():
                        t0 = time.perf_counter()
                        answer = call(n)
                        timings[name].append((time.perf_counter() - t0) * 1000)
                        assert answer.status_code == 200, answer.text[:300]
        finally:
            running.stop()
            inspector.close()
            host.shutdown()
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
              f"({os.cpu_count()} cores)")
        print(f"{'request':<26}{'p50 ms':>9}{'p95 ms':>9}{'target':>9}{'p95/target':>12}")
        for name, values in timings.items():
            p50, p95 = statistics.median(values), pct(values, 0.95)
            print(f"{name:<26}{p50:>9.1f}{p95:>9.1f}{TARGETS_MS[name]:>9.0f}"
                  f"{p95 / TARGETS_MS[name]:>12.2f}")
        page = page_html().encode()
        external = re.findall(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", page.decode())
        print(f"page weight: {len(page):,} bytes (HTML+CSS+JS in one file); target "
              f"{PAGE_TARGET:,}: ratio {len(page) / PAGE_TARGET:.3f}; external references: "
              f"{len(external)}")


if __name__ == "__main__":
    main()
