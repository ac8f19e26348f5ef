"""Session archive benchmark: appends, size on disk, search and session_search latency.

Same method as reference/perf-baseline.md section 1: a seeded corpus (session_corpus.py: 20k-word
Zipf vocabulary, ~40-message sessions with tool calls, mixed lengths, ~3% CJK) is bulk-loaded
through the real schema and triggers (one transaction per session), then the live append path is
measured on top of it, one message per transaction, as the agent appends. Percentiles are nearest
rank; every figure is printed with its ratio to the target (ratio <= 1.0 means the target is met;
for throughput the ratio is target / measured). Nothing here asserts: the machine is shared.

    python bench/bench_session_archive.py                       # 10k and 100k messages
    python bench/bench_session_archive.py --sizes 10000,100000,1000000 --dir /tmp/sa-bench
    python bench/bench_session_archive.py --sizes 100000 --embedder      # + semantic search

With ``--embedder`` (needs ``hermes-core[embeddings]`` and the model package) it also measures:
the background indexing rate of the real local model on ``--embed-sample`` messages; appends
while the indexer runs; the model's memory; then it fills the remaining vectors with random unit
vectors (the vector path's cost does not depend on their values, and embedding a whole large
corpus takes hours on 2 cores) to time hybrid queries and session_search at full size.

At 1M messages the bulk load takes about 3 minutes on the project's 2-vCPU machine and the whole
run about 5; the database needs ~0.7 GB in --dir (deleted afterwards unless --keep).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from session_corpus import Corpus, QuerySet

from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.search import search_messages
from hermes_core.plugins.memory.session_archive.tool import session_search
from hermes_core.types import Message

#: (label, target, unit, lower_is_better); targets of issue 4, meant for 1M messages
TARGETS = {
    "append_p50": (0.45, "ms", True),
    "append_p999": (50.0, "ms", True),
    "append_rate": (1000.0, "msg/s", False),
    "bytes_per_msg": (1000.0, "B", True),
    "search_p50": (3.0, "ms", True),
    "search_p95": (20.0, "ms", True),
    "cjk_long_p50": (3.0, "ms", True),
    "cjk_long_p95": (20.0, "ms", True),
    "cjk_short_p50": (20.0, "ms", True),
    "cjk_short_p95": (20.0, "ms", True),
    "tool_p95": (40.0, "ms", True),
    "payload_chars": (16000.0, "chars", True),
    "vector_bytes_per_msg": (1000.0, "B", True),
    "hybrid_p95": (40.0, "ms", True),
    "hybrid_tool_p95": (40.0, "ms", True),
}
HERMES_1M = {"append_p50": 0.38, "append_rate": 64, "bytes_per_msg": 2709, "search_p50": 6.3,
             "search_p95": 93, "cjk_long_p50": 5.6, "cjk_long_p95": 8.6, "cjk_short_p50": 409,
             "cjk_short_p95": 454, "tool_p95": 121}


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def load(path: Path, corpus: Corpus, n: int) -> tuple[float, list[Message], int]:
    """Bulk-load ``n`` messages; return (msgs/s, the first 10k messages, next session index)."""
    sample: list[Message] = []
    done = 0
    index = 0
    start = time.perf_counter()
    with SessionArchive(path, synchronous="normal") as archive:
        for index, (sid, msgs) in enumerate(corpus.sessions()):  # noqa: B007
            if done >= n:
                break
            msgs = msgs[: n - done]
            archive.append_messages(sid, msgs)
            done += len(msgs)
            if len(sample) < 10_000:
                sample.extend(msgs)
    return done / (time.perf_counter() - start), sample[:10_000], index


def live_appends(
    path: Path, corpus: Corpus, first: int, count: int, synchronous: str
) -> tuple[list[float], float]:
    """Append ``count`` messages one by one; return (latencies ms, msgs/s)."""
    latencies: list[float] = []
    start = time.perf_counter()
    with SessionArchive(path, synchronous=synchronous) as archive:  # type: ignore[arg-type]
        for sid, msgs in corpus.sessions(first):
            for m in msgs:
                t = time.perf_counter()
                archive.append_message(sid, m)
                latencies.append((time.perf_counter() - t) * 1000)
                if len(latencies) >= count:
                    return latencies, count / (time.perf_counter() - start)
    raise AssertionError("unreachable: the corpus is endless")


def breakdown(path: Path, total: int, limit: int = 6) -> list[tuple[str, float]]:
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        return [(name, size / total) for name, size in rows.fetchall()[:limit]]
    except sqlite3.OperationalError:  # SQLite built without dbstat
        return []
    finally:
        con.close()


def searches(path: Path, queries: QuerySet, rounds: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with SessionArchive(path) as archive:
        current = archive.list_sessions(limit=1)[0].id
        for q in queries.plain[:5]:  # warm the page cache the way a just-written file is
            search_messages(archive, q)
        for key, qs in (("search", queries.plain), ("cjk_long", queries.cjk_long),
                        ("cjk_short", queries.cjk_short)):
            times: list[float] = []
            found = 0
            for _ in range(rounds):
                for q in qs:
                    hits: list[int] = []
                    times.append(timed(lambda q=q, h=hits: h.extend(
                        x.message_id for x in search_messages(archive, q).hits)))
                    found += bool(hits)
            out[f"{key}_p50"], out[f"{key}_p95"] = pct(times, 0.5), pct(times, 0.95)
            out[f"{key}_found"] = found / (rounds * len(qs))
        times = []
        for _ in range(rounds):
            for q in queries.plain:
                times.append(timed(lambda q=q: session_search(archive, q,
                                                              current_session_id=current)))
        out["tool_p50"], out["tool_p95"] = pct(times, 0.5), pct(times, 0.95)
        sizes = [len(json.dumps(session_search(archive, q, current_session_id=current),
                                ensure_ascii=False)) for q in queries.plain]
        out["payload_chars"], out["payload_max"] = pct(sizes, 0.95), max(sizes)
        out["tool_recent"] = statistics.median(
            timed(lambda: session_search(archive, "", current_session_id=current))
            for _ in range(20))
    return out


def semantic_figures(path: Path, corpus: Corpus, queries: QuerySet, next_session: int,
                     sample: int, rounds: int) -> None:
    """Indexing rate, appends under indexing, model memory, hybrid latency, payload."""
    import numpy as np

    from hermes_core.embeddings import GuardedEmbedder
    from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
    from hermes_core.plugins.memory.session_archive.tool import Semantic
    from hermes_core.plugins.memory.session_archive.vectors import (
        VectorIndex,
        VectorIndexer,
        index_batch,
        state,
    )

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = MiniLMEmbedder(MiniLMConfig())
    guarded = GuardedEmbedder(model, timeout=600)
    guarded.embed(["warm up"])
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"  model loaded: +{(rss1 - rss0) / 1024:.0f} MB peak RSS (all-MiniLM-L6-v2, numpy)")
    with SessionArchive(path) as archive:
        done, start = 0, time.perf_counter()
        while done < sample:
            n = index_batch(archive, guarded, 32)
            if n == 0:
                break
            done += n
        rate = done / (time.perf_counter() - start)
        print(f"  background indexing (real model, {done:,} messages): {rate:,.2f} msg/s; "
              f"a {archive.count_messages():,}-message archive would take "
              f"{archive.count_messages() * 0.6 / max(rate, 1e-9) / 3600:.1f} h "
              "(~60% of messages are user/assistant)")
    # appends while the indexer works: the turn never waits for embedding
    with SessionArchive(path) as archive:
        indexer = VectorIndexer(archive, guarded, batch=32)
        lat: list[float] = []
        for sid, msgs in corpus.sessions(next_session + 5000):
            for m in msgs:
                t = time.perf_counter()
                archive.append_message(sid, m)
                lat.append((time.perf_counter() - t) * 1000)
                indexer.wake()
            if len(lat) >= 1000:
                break
        indexer.close(timeout=60)
    show("append_p50", pct(lat, 0.5), "  [while the indexer embeds]")
    # fill the rest with random unit vectors, then time queries at full size
    rng = np.random.default_rng(1)
    with SessionArchive(path) as archive:
        st = state(archive, guarded)
        rows = archive.db.read(
            "SELECT id FROM messages WHERE id > ? AND role IN ('user','assistant')",
            (st.through,))
        ids = [r[0] for r in rows]
        for i in range(0, len(ids), 20_000):
            part = ids[i:i + 20_000]
            v = rng.standard_normal((len(part), 384)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            blobs = [(mid, v[k].astype(np.float16).tobytes()) for k, mid in enumerate(part)]
            archive.db.write(lambda con, b=blobs: con.executemany(
                "INSERT OR REPLACE INTO message_vectors(id, vec) VALUES (?, ?)", b))
        if ids:
            archive.db.write(lambda con: con.execute(
                "UPDATE meta SET value = ? WHERE key = 'vectors_through'", (str(ids[-1]),)))
        total = archive.count_messages()
        vec_count = state(archive, guarded).count
    parts = dict(breakdown(path, total, limit=20))
    per_msg = parts.get("message_vectors", 0.0)
    show("vector_bytes_per_msg", per_msg, f"  [{vec_count:,} vectors for {total:,} messages; "
         "per message of the archive]")
    with SessionArchive(path) as archive:
        index = VectorIndex(archive)
        t = time.perf_counter()
        index.refresh(384)
        print(f"  vector index load: {(time.perf_counter() - t) * 1000:.0f} ms for "
              f"{len(index.ids):,} vectors ({index.matrix.nbytes / 1e6:.0f} MB in memory)")
        sem = Semantic(embedder=guarded, index=index)
        current = archive.list_sessions(limit=1)[0].id
        from hermes_core.plugins.memory.session_archive.hybrid import hybrid_candidates

        embed_ms = [timed(lambda q=q: guarded.embed([q])) for q in queries.plain]
        hyb = [timed(lambda q=q: hybrid_candidates(archive, q, guarded, index))
               for _ in range(rounds) for q in queries.plain]
        tool = [timed(lambda q=q: session_search(archive, q, current_session_id=current,
                                                 semantic=sem))
                for _ in range(rounds) for q in queries.plain]
        sizes = [len(json.dumps(session_search(archive, q, current_session_id=current,
                                               semantic=sem), ensure_ascii=False))
                 for q in queries.plain]
    print(f"  query embedding alone: p50 {pct(embed_ms, .5):.1f} ms p95 {pct(embed_ms, .95):.1f} ms")
    show("hybrid_p95", pct(hyb, 0.95), f"  [p50 {pct(hyb, .5):.1f} ms; embedding included]")
    show("hybrid_tool_p95", pct(tool, 0.95), f"  [p50 {pct(tool, .5):.1f} ms]")
    show("payload_chars", pct(sizes, 0.95), f"  [hybrid; max {max(sizes):,}]")
    guarded.close()


def show(key: str, value: float, note: str = "") -> None:
    target, unit, lower = TARGETS[key]
    ratio = value / target if lower else target / max(value, 1e-9)
    mark = "ok " if ratio <= 1.0 else "MISS"
    hermes = f"  (Hermes at 1M: {HERMES_1M[key]} {unit})" if key in HERMES_1M else ""
    print(f"  {mark} {key:<15} {value:>10.3f} {unit:<6} target {'<=' if lower else '>='} "
          f"{target:g} {unit}  ratio {ratio:.2f}{hermes}{note}")


def run(n: int, root: Path, appends: int, rounds: int, keep: bool, embedder: bool = False,
        embed_sample: int = 2000) -> None:
    path = root / f"state-{n}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    corpus = Corpus()
    print(f"\n== {n:,} messages ({path})")
    rate, sample, next_session = load(path, corpus, n)
    print(f"  bulk load through schema and triggers: {rate:,.0f} msg/s")
    queries = corpus.queries(sample)
    from hermes_core.plugins.memory.session_archive import SessionArchiveConfig

    default = SessionArchiveConfig().synchronous
    for offset, mode in enumerate(("full", "normal")):
        lat, steady = live_appends(path, corpus, next_session + 1000 * offset, appends, mode)
        label = "the default" if mode == default else "the other setting"
        print(f"  live appends ({appends:,}, synchronous={mode}, {label}): p50 "
              f"{pct(lat, .5):.3f} p99 {pct(lat, .99):.2f} p99.9 {pct(lat, .999):.2f} "
              f"max {max(lat):.1f} ms")
        show("append_p50", pct(lat, 0.5))
        show("append_p999", pct(lat, 0.999))
        show("append_rate", steady)
    with SessionArchive(path) as archive:
        total = archive.count_messages()
    size = os.path.getsize(path)  # after close: the WAL was checkpointed and truncated
    show("bytes_per_msg", size / total, f"  [{size / 1e6:.1f} MB for {total:,} messages]")
    parts = breakdown(path, total)
    if parts:
        print("  by object: " + ", ".join(f"{name} {b:.0f} B" for name, b in parts))
    figures = searches(path, queries, rounds)
    for key in ("search_p50", "search_p95", "cjk_long_p50", "cjk_long_p95", "cjk_short_p50",
                "cjk_short_p95", "tool_p95"):
        show(key, figures[key])
    show("payload_chars", figures["payload_chars"], f"  [p95 of session_search results; max "
         f"{figures['payload_max']:,.0f}; Hermes 14-16k]")
    print(f"  queries with at least one hit: plain {figures['search_found']:.0%}, CJK 3+ "
          f"{figures['cjk_long_found']:.0%}, CJK 1-2 {figures['cjk_short_found']:.0%}; "
          f"session_search p50 {figures['tool_p50']:.2f} ms, recent-sessions mode "
          f"{figures['tool_recent']:.2f} ms")
    if embedder:
        print("  -- with the local embedder")
        semantic_figures(path, corpus, queries, next_session, embed_sample, rounds)
    if not keep:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated corpus sizes in messages (default 10000,100000)")
    parser.add_argument("--appends", type=int, default=5000, help="live appends measured")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the query set")
    parser.add_argument("--dir", help="where the databases go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--embedder", action="store_true",
                        help="also measure semantic search with the local embedder")
    parser.add_argument("--embed-sample", type=int, default=2000,
                        help="messages embedded with the real model to measure the rate")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sa-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"SQLite {sqlite3.sqlite_version}, Python {sys.version.split()[0]}; targets are for 1M "
          "messages, ratios at smaller sizes are for reference")
    try:
        for n in sizes:
            run(n, root, args.appends, args.rounds, args.keep, args.embedder, args.embed_sample)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
