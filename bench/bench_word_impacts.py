"""The word ranking from the kept best messages of the commonest words (impacts.py) against FTS5
scoring every match, on one archive: build cost and size, identity, and hybrid / session_search
latency A B A B with the ratio to the 40 ms p95 target (issue 35).

On a state.db made by bench_session_archive.py (``--embedder`` gives it the synthetic vectors
the hybrid query needs; without vectors the hybrid figures are the word path alone). Work on a
copy: it builds the kept rows in the file (``sessions reindex --words`` does the same).

* **build**: seconds, common words, rows, bytes of the two tables and their index per message;
* **identity**: ``search.candidates`` with the kept rows off (FTS5's bm25 over every match) and
  on, for the corpus's 50 plain queries, ``--random`` common words and ``--random`` random words
  of the corpus, ``--random`` two-word queries, at k = 50, 610 (what the hybrid fusion asks
  for) and 2,000, under three scopes (none; the newest session's lineage excluded; one user key
  or the user role): ids, scores and order must be equal;
* **latency**: ``hybrid_candidates`` and ``session_search`` for the 50 queries, ``--rounds``
  rounds, A (kept rows off) and B (on) alternated A B / B A in one process; their results are
  compared call by call. p50 / p95 and B/A, B's p95 against 40 ms, the load average.

    python bench/bench_word_impacts.py /tmp/sa/copy-of-state-1000000.db --rounds 4
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_archive_semantic import pct
from session_corpus import Corpus

from hermes_core.plugins.memory.session_archive import SessionArchive, impacts, search

_TABLES = ("term_impacts", "term_bounds", "term_impacts_doc", "sqlite_autoindex_term_bounds_1",
           "sqlite_autoindex_term_bounds_2")


def build(archive: SessionArchive) -> None:
    t = time.perf_counter()
    words = impacts.rebuild(archive)
    seconds = time.perf_counter() - t
    rows = archive.db.read("SELECT count(*) FROM term_impacts")[0][0]
    size = archive.db.read(f"SELECT sum(pgsize) FROM dbstat WHERE name IN "
                           f"({', '.join('?' * len(_TABLES))})", _TABLES)[0][0] or 0
    n = archive.count_messages()
    print(f"  build: {seconds:.1f} s, {words} common words, {rows:,} rows, {size:,} bytes "
          f"({size / max(n, 1):.1f} per message of {n:,})")


def identity(archive: SessionArchive, queries: list[str], sample: list[Any], n: int) -> None:
    on = search.top_k
    current = archive.list_sessions(limit=1)[0].id
    common = [r[0] for r in archive.db.read("SELECT term FROM term_bounds")]
    users = [r[0] for r in archive.db.read(
        "SELECT user_id FROM sessions WHERE user_id IS NOT NULL LIMIT 1")]
    rng = random.Random(11)
    words = [w for m in rng.sample(sample, min(400, len(sample)))
             for w in re.findall(r"[a-z]{3,}", m.content.lower())]
    extra = rng.sample(common, min(n, len(common))) + rng.sample(words, min(n, len(words)))
    extra += [f"{rng.choice(words)} {rng.choice(common or words)}" for _ in range(n)]
    scopes: list[dict[str, Any]] = [{}, {"exclude_lineage_of": current},
                                    {"user": users[0]} if users else {"roles": ("user",)}]
    same, differ, answered = 0, 0, [0]

    def counted(*args: Any) -> Any:
        out = on(*args)
        answered[0] += out is not None
        return out

    try:
        for q in queries + extra:
            plan = search.plan_query(archive, q)
            for k in (50, 610, 2000):
                for scope in scopes:
                    search.top_k = lambda *a: None  # type: ignore[assignment]
                    every = [(c.id, c.score) for c in search.candidates(archive, plan, limit=k,
                                                                        **scope)]
                    search.top_k = counted
                    kept = [(c.id, c.score) for c in search.candidates(archive, plan, limit=k,
                                                                       **scope)]
                    if kept == every:
                        same += 1
                    else:
                        differ += 1
                        print(f"    DIFFER: {q!r} k={k} {scope}")
    finally:
        search.top_k = on
    print(f"  identity: {same} identical, {differ} differ ({len(queries)} corpus + "
          f"{len(extra)} random queries x k 50/610/2000 x {len(scopes)} scopes; "
          f"{answered[0]} answered from the kept rows, the rest by FTS5)")


def latency(archive: SessionArchive, queries: list[str], rounds: int) -> None:
    from hermes_core.embeddings import GuardedEmbedder
    from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
    from hermes_core.plugins.memory.session_archive.hybrid import hybrid_candidates
    from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search
    from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex

    on = search.top_k
    variants = {"A": lambda *a: None, "B": on}
    embedder = GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=3600)
    index = VectorIndex(archive)
    index.refresh(384)
    sem = Semantic(embedder=embedder, index=index)
    current = archive.list_sessions(limit=1)[0].id
    for q in queries[:3]:
        for v in variants.values():
            search.top_k = v
            hybrid_candidates(archive, q, embedder, index, exclude_lineage_of=current)
    times: dict[tuple[str, str], list[float]] = {(v, k): [] for v in "AB"
                                                 for k in ("hybrid", "tool")}
    same = True
    load0 = os.getloadavg()[0]
    try:
        for r in range(rounds):
            for q in queries:
                outs = {}
                for v in ("AB" if r % 2 == 0 else "BA"):
                    search.top_k = variants[v]
                    t = time.perf_counter()
                    res = hybrid_candidates(archive, q, embedder, index,
                                            exclude_lineage_of=current)
                    times[(v, "hybrid")].append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    out = session_search(archive, q, current_session_id=current, semantic=sem)
                    times[(v, "tool")].append((time.perf_counter() - t) * 1000)
                    outs[v] = ([(c.id, c.score) for c in res.found], out)
                same &= outs["A"] == outs["B"]
    finally:
        search.top_k = on
        embedder.close()
    print(f"  latency: {len(queries)} queries x {rounds} rounds, A (every match scored) and B "
          f"(kept rows) alternated; results identical: {same}")
    for k in ("hybrid", "tool"):
        a, b = times[("A", k)], times[("B", k)]
        print(f"    {k:<6} A p50 {pct(a, .5):6.1f} p95 {pct(a, .95):6.1f} | B p50 "
              f"{pct(b, .5):6.1f} p95 {pct(b, .95):6.1f} ms | B/A p50 {pct(b, .5) / pct(a, .5):.2f}"
              f" p95 {pct(b, .95) / pct(a, .95):.2f} | B p95 / 40 ms {pct(b, .95) / 40:.2f}")
    print(f"  load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end, "
          f"{os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("archive", type=Path, help="a state.db (a copy: the kept rows are "
                        "built in it)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--random", type=int, default=60, help="random queries of each kind")
    parser.add_argument("--no-build", action="store_true", help="use the kept rows as they are")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    corpus = Corpus()
    sample = [m for _s, msgs in itertools.islice(corpus.sessions(), 400) for m in msgs][:10_000]
    queries = list(corpus.queries(sample).plain)
    with SessionArchive(args.archive) as archive:
        print(f"{args.archive.name}: {archive.count_messages():,} messages")
        if not args.no_build:
            build(archive)
        identity(archive, queries, sample, args.random)
        if not args.no_latency:
            latency(archive, queries, args.rounds)


if __name__ == "__main__":
    main()
