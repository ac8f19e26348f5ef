"""Semantic (hybrid) search costs of the session archive, at 100k and 1M messages.

Run by bench_session_archive.py with ``--embedder`` (or alone, on an archive it built), it prints
with ratios to the targets of issue 19:

* the local model's memory once loaded, and the background indexing rate (messages/s) with the
  real all-MiniLM-L6-v2 on the corpus's user and assistant messages;
* append p50 with the indexer embedding in the background against none, side by side (A B A B);
* bytes per message of the stored vectors, and memory of the in-memory index;
* hybrid query p50/p95 (query embedding, word search, sign-bit scan, rescoring, fusion) and the
  whole session_search call, and its payload in characters.

Embedding a million messages with the real model takes days on 2 cores (see the indexing rate),
so for the scale runs every user/assistant message gets a *synthetic* vector: one of 256 real
embeddings of corpus messages plus Gaussian noise, normalised (clustered like real text, not
uniform). Query embedding is the real model. The quality of the sign-bit pre-selection is
measured on the same vectors: recall of the exact top 10 (brute force over float32) among the
index's top 10.
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.hybrid import hybrid_candidates
from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex
from hermes_core.plugins.memory.session_archive.vector_store import vector_store
from hermes_core.plugins.memory.session_archive.vectors import VectorIndexer
from hermes_core.types import Message

TARGETS = {"hybrid_p95": (40.0, "ms", True), "vector_bytes_per_msg": (1000.0, "B", True),
           "payload_chars": (16000.0, "chars", True), "append_p50": (0.45, "ms", True)}
MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


def show(key: str, value: float, note: str = "") -> None:
    target, unit, lower = TARGETS[key]
    ratio = value / target if lower else target / max(value, 1e-9)
    print(f"  {'ok ' if ratio <= 1.0 else 'MISS'} {key:<22} {value:>10.2f} {unit:<6} target "
          f"{'<=' if lower else '>='} {target:g} {unit}  ratio {ratio:.2f}{note}")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def model_figures(embedder: GuardedEmbedder, texts: list[str]) -> None:
    before = rss_mb()
    embedder.embed(["load the model"])
    print(f"  model loaded: +{rss_mb() - before:.0f} MB RSS (all-MiniLM-L6-v2 in numpy)")
    start = time.perf_counter()
    embedder.embed(texts, background=True)
    rate = len(texts) / (time.perf_counter() - start)
    chars = statistics.median(len(t) for t in texts)
    print(f"  background indexing: {rate:.1f} msg/s ({len(texts)} corpus messages, median "
          f"{chars:.0f} chars, first 2,000 chars and 128 word pieces of each embedded)")
    times = []
    for q in ("how did I fix the deploy timeout", "database migration plan", "cache error",
              "what did we decide about the retry policy", "kubernetes pod memory"):
        t = time.perf_counter()
        embedder.embed([q])
        times.append((time.perf_counter() - t) * 1000)
    print(f"  query embedding alone: median {statistics.median(times):.1f} ms, max "
          f"{max(times):.1f} ms")


def appends_side_by_side(path: Path | Callable[[], SessionArchive], embedder: GuardedEmbedder,
                         messages: list[Message], rounds: int = 4, per: int = 300) -> None:
    """Append p50 with the indexer embedding in the background (B) and without (A), A B A B."""
    figures: dict[str, list[float]] = {"A": [], "B": []}
    opened = SessionArchive(path) if isinstance(path, Path) else path()
    with opened as archive:
        k = 0
        for r in range(rounds):
            for mode in ("A", "B"):
                indexer = VectorIndexer(archive, embedder, batch=32) if mode == "B" else None
                if indexer is not None:
                    indexer.wake()
                lat = []
                for _ in range(per):
                    m = messages[k % len(messages)]
                    k += 1
                    t = time.perf_counter()
                    archive.append_message(f"bench-appends-{r}", m)
                    lat.append((time.perf_counter() - t) * 1000)
                    if indexer is not None:
                        indexer.wake()
                if indexer is not None:
                    indexer.close(timeout=60)
                figures[mode].append(pct(lat, 0.5))
    a, b = statistics.median(figures["A"]), statistics.median(figures["B"])
    print(f"  append p50 without indexer {a:.3f} ms, with the indexer embedding {b:.3f} ms "
          f"(medians of {rounds} alternating runs of {per}; ratio B/A {b / a:.2f})")
    show("append_p50", b, "  [with the indexer running]")


def synthetic_vectors(archive: SessionArchive, embedder: GuardedEmbedder, seed: int = 7) -> int:
    """Give every user/assistant message a clustered synthetic vector (see the module doc)."""
    ids = np.array([r[0] for r in archive.db.read(
        "SELECT id FROM messages WHERE role IN ('user', 'assistant') AND length(content) > 0 "
        "ORDER BY id")], dtype=np.int64)
    texts = [r[0][:2000] for r in archive.db.read(
        "SELECT content FROM messages WHERE role IN ('user', 'assistant') AND length(content) > 0 "
        "ORDER BY id LIMIT 256")]
    centres = np.asarray(embedder.embed(texts, background=True, timeout=3600), dtype=np.float32)
    rng = np.random.default_rng(seed)
    store = vector_store(archive)
    archive.db.write(lambda con: con.execute("DELETE FROM message_vectors"))
    for lo in range(0, len(ids), 50_000):
        part = ids[lo:lo + 50_000]
        v = centres[rng.integers(0, len(centres), len(part))]
        v = v + rng.standard_normal(v.shape).astype(np.float32) * 0.03
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        blobs = v.astype(np.float16)
        archive.db.write(lambda con, p=part, b=blobs: con.executemany(
            "INSERT INTO message_vectors(id, vec) VALUES (?, ?)",
            ((int(i), b[j].tobytes()) for j, i in enumerate(p))))

    def meta(con: Any) -> None:
        for key, value in (("vectors_model", MODEL), ("vectors_dimension", "384"),
                           ("vectors_through", str(int(ids[-1])))):
            store.set_meta(con, key, value)

    archive.db.write(meta)
    return len(ids)


def preselection_recall(archive: SessionArchive, index: VectorIndex,
                        queries: Any) -> tuple[float, float, float]:
    """Recall of the exact top 10 among the index's top 10 on a 100k-vector sample: for queries
    near a stored message (a stored vector plus noise), and for the corpus's real queries,
    whose nearest synthetic vectors are near-ties (then also the mean cosine lost at rank 10)."""
    rows = archive.db.read("SELECT id, vec FROM message_vectors ORDER BY id LIMIT 100000")
    ids = np.array([r[0] for r in rows])
    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16).reshape(
        len(rows), -1).astype(np.float32)
    sample = VectorIndex(archive, rescore=index.rescore)
    sample._reset(MODEL, 384)
    sample._append(rows, 384)
    rng = np.random.default_rng(11)
    near = mat[rng.integers(0, len(mat), 20)] + rng.standard_normal((20, 384)).astype(
        np.float32) * 0.05
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    out = []
    for qs in (near, queries):
        found, lost = [], []
        for q in qs:
            order = np.argsort(-(mat @ q))[:10]
            got = sample.nearest(q, 10)
            found.append(len(set(ids[order].tolist()) & {i for i, _ in got}) / 10)
            lost.append(float(mat[order[-1]] @ q) - got[-1][1])
        out.append((statistics.mean(found), statistics.mean(lost)))
    return out[0][0], out[1][0], out[1][1]


def vector_bytes(archive: SessionArchive) -> int:
    """Bytes on disk of the vectors table and its indexes."""
    if getattr(archive, "backend", "sqlite") == "postgresql":
        return int(archive.db.read("SELECT pg_total_relation_size('message_vectors')")[0][0])
    return int(sum(r[0] for r in archive.db.read(
        "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'message_vectors%' OR name LIKE "
        "'sqlite_autoindex_message_vectors%'")))


def run_semantic(path: Path | Callable[[], SessionArchive], queries: list[str],
                 embedder: GuardedEmbedder | None = None, rounds: int = 3) -> None:
    """The scale figures on an archive already filled with messages (``path``: a state.db, or
    a function opening the archive, e.g. a PostgreSQL one)."""
    embedder = embedder or GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=3600)
    opened = SessionArchive(path) if isinstance(path, Path) else path()
    with opened as archive:
        total = archive.count_messages()
        t = time.perf_counter()
        n = synthetic_vectors(archive, embedder)
        print(f"  {n:,} synthetic vectors written in {time.perf_counter() - t:.0f} s")
        if getattr(archive, "backend", "sqlite") == "postgresql":
            archive.db.write_one("ANALYZE message_vectors")
        size = vector_bytes(archive)
        show("vector_bytes_per_msg", size / total, f"  [{size / n:.0f} B per embedded message, "
             f"{n:,} of {total:,} messages are user/assistant text]")
        index = VectorIndex(archive)
        before = rss_mb()
        t = time.perf_counter()
        index.refresh(384)
        print(f"  vector index load: {time.perf_counter() - t:.1f} s for {len(index):,} vectors; "
              f"{index.memory_bytes() / 1e6:.0f} MB in memory (RSS +{rss_mb() - before:.0f} MB)")
        qvs = np.asarray(embedder.embed(queries[:20]), dtype=np.float32)
        near, real, lost = preselection_recall(archive, index, qvs)
        print(f"  sign-bit pre-selection ({index.rescore} rescored, 100k-vector sample): recall "
              f"of the exact top 10 {near:.2f} for queries near a message; {real:.2f} for the "
              f"corpus queries, whose top 10 are near-ties (cosine lost at rank 10: {lost:.4f})")
        sem = Semantic(embedder=embedder, index=index)
        current = archive.list_sessions(limit=1)[0].id
        for q in queries[:3]:
            hybrid_candidates(archive, q, embedder, index)
        figures: dict[str, list[float]] = {"hybrid": [], "tool": [], "scan": [], "words": [],
                                           "scan1": []}
        chars: list[int] = []

        def timed(fn: Callable[[], object]) -> float:
            s = time.perf_counter()
            fn()
            return (time.perf_counter() - s) * 1000

        for _ in range(rounds):
            for i, q in enumerate(queries):
                figures["scan"].append(timed(lambda i=i: index.nearest(qvs[i % len(qvs)], 100)))
                figures["scan1"].append(timed(lambda i=i: index.nearest(qvs[i % len(qvs)], 100,
                                                                        threads=1)))
                figures["words"].append(timed(lambda q=q: hybrid_candidates(
                    archive, q, None, None, exclude_lineage_of=current)))
                figures["hybrid"].append(timed(lambda q=q: hybrid_candidates(
                    archive, q, embedder, index, exclude_lineage_of=current)))
                out: list[Any] = []
                figures["tool"].append(timed(lambda q=q, o=out: o.append(session_search(
                    archive, q, current_session_id=current, semantic=sem))))
                import json

                chars.append(len(json.dumps(out[0], ensure_ascii=False)))
        print(f"  word search alone (same loop): p50 {pct(figures['words'], .5):.1f} ms, p95 "
              f"{pct(figures['words'], .95):.1f} ms")
        print(f"  vector scan + rescoring alone: p50 {pct(figures['scan'], .5):.1f} ms, p95 "
              f"{pct(figures['scan'], .95):.1f} ms on two threads; one thread (as beside a word "
              f"search) p50 {pct(figures['scan1'], .5):.1f} ms, p95 "
              f"{pct(figures['scan1'], .95):.1f} ms")
        show("hybrid_p95", pct(figures["hybrid"], 0.95),
             f"  [p50 {pct(figures['hybrid'], .5):.1f} ms; query embedding included]")
        show("hybrid_p95", pct(figures["tool"], 0.95),
             f"  [whole session_search call; p50 {pct(figures['tool'], .5):.1f} ms]")
        show("payload_chars", float(pct(chars, 0.95)), f"  [p95 of session_search results; max "
             f"{max(chars):,}]")
        print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
