"""Hybrid query latency of the archive's fusion against an earlier revision's, side by side.

Builds (or reuses) a 100k-message archive from the benchmark corpus with synthetic vectors (as
bench_archive_semantic.py does), loads hybrid.py as it is now and as it was at ``--before``
(read with ``git show``), and times ``hybrid_candidates`` for the corpus's plain-language
queries with the real query embedder, interleaving the two (A B, then B A) so that a noisy
machine slows both alike. Prints p50/p95 of each and their ratios.

    python bench/bench_fusion_latency.py --before beb0ac5 [--dir /tmp/fusion] [--rounds 3]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench_archive_semantic import pct, synthetic_vectors
from bench_session_archive import load
from revision import module_at
from session_corpus import Corpus

from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive import hybrid as current
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--dir", type=Path, default=None, help="where the archive is kept")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="fusion-"))
    root.mkdir(parents=True, exist_ok=True)
    before = module_at(args.before, "hybrid", root)
    path = root / f"state-{args.size}.db"
    corpus = Corpus()
    embedder = GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=3600)
    if not path.exists():
        load(lambda **kw: SessionArchive(path, **kw), corpus, args.size)  # type: ignore[arg-type]
    with SessionArchive(path) as archive:
        if not archive.db.read("SELECT count(*) FROM message_vectors")[0][0]:
            print(f"  {synthetic_vectors(archive, embedder):,} synthetic vectors written")
    sample = [m for _s, msgs in itertools.islice(corpus.sessions(), 400) for m in msgs][:10_000]
    queries = corpus.queries(sample).plain
    with SessionArchive(path) as archive:
        index = VectorIndex(archive)
        index.refresh(embedder.dimension)
        lineage = archive.list_sessions(limit=1)[0].id
        for q in queries[:3]:  # warm both paths
            before.hybrid_candidates(archive, q, embedder, index)
            current.hybrid_candidates(archive, q, embedder, index)
        times: dict[str, list[float]] = {"before": [], "after": []}
        pair = (("before", before), ("after", current))
        for r in range(args.rounds):
            for q in queries:
                for name, module in (pair if r % 2 == 0 else pair[::-1]):
                    start = time.perf_counter()
                    module.hybrid_candidates(archive, q, embedder, index,
                                             exclude_lineage_of=lineage)
                    times[name].append((time.perf_counter() - start) * 1000)
    print(f"hybrid query at {args.size:,} messages ({len(queries)} queries x {args.rounds} "
          f"rounds, interleaved; query embedding included)")
    for name, xs in times.items():
        print(f"  {name:<7} p50 {pct(xs, .5):6.1f} ms  p95 {pct(xs, .95):6.1f} ms  "
              f"mean {statistics.mean(xs):6.1f} ms")
    print(f"  after / before: p50 {pct(times['after'], .5) / pct(times['before'], .5):.2f}, "
          f"p95 {pct(times['after'], .95) / pct(times['before'], .95):.2f} (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
