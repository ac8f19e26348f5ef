"""Offline recall on a LongMemEval-format set: word search vs vectors vs hybrid, per variant.

Loads every distinct haystack session of the dataset into a fresh archive (message timestamps
from ``haystack_dates``), embeds it with the local embedder, then asks each question through
``hybrid_candidates`` in four modes and reports session-level hit@k (an evidence session among
the first k distinct sessions) per ``variant``:

* ``words``: the archive's word search alone (BM25, the fallbacks of query.py);
* ``vectors``: cosine similarity alone;
* ``rrf``: naive reciprocal-rank fusion of the two (k=60), for comparison;
* ``hybrid``: the tuned score fusion of hybrid.py.

For knowledge-update questions it also reports how often the current session ranks above the
outdated one (``outdated_session_ids``).

    python bench/recall_paraphrase.py examples/eval/paraphrase.json [--k 3] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from hermes_core.config import CoreConfig
from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.hybrid import Weights, hybrid_candidates
from hermes_core.plugins.memory.session_archive.vectors import VectorIndex, reindex
from hermes_core.types import Message, Session

MODES = ("words", "vectors", "rrf", "hybrid")


def _when(text: str) -> float:
    return datetime.strptime(text.split(" (")[0] + text.split(")")[-1], "%Y/%m/%d %H:%M").timestamp()


def load(dataset: list[dict], archive: SessionArchive) -> None:
    seen: set[str] = set()
    for item in dataset:
        for sid, date, turns in zip(item["haystack_session_ids"], item["haystack_dates"],
                                    item["haystack_sessions"], strict=True):
            if sid in seen:
                continue
            seen.add(sid)
            start = _when(date)
            archive.open_session(Session(id=sid, started_at=start))
            archive.append_messages(sid, [Message(t["role"], t["content"], timestamp=start + k)
                                          for k, t in enumerate(turns)])


def ranked_sessions(archive: SessionArchive, ids: list[int]) -> list[str]:
    if not ids:
        return []
    rows = dict(archive.db.read(
        "SELECT m.id, s.id FROM messages AS m JOIN sessions AS s ON s.num = m.session WHERE m.id "
        f"IN ({','.join('?' * len(ids))})", tuple(ids)))
    return list(dict.fromkeys(rows[i] for i in ids if i in rows))


def run_mode(archive, guarded, index, question: str, mode: str, weights: Weights) -> list[str]:
    if mode == "words":
        r = hybrid_candidates(archive, question, None, None)
        return ranked_sessions(archive, [c.id for c in r.found])
    if mode == "vectors":
        r = hybrid_candidates(archive, question, guarded, index, use_words=False, weights=weights)
        return ranked_sessions(archive, [c.id for c in r.found])
    if mode == "rrf":
        lex = [c.id for c in hybrid_candidates(archive, question, None, None).found]
        vec = [c.id for c in hybrid_candidates(archive, question, guarded, index,
                                               use_words=False, weights=weights).found]
        score: dict[int, float] = collections.defaultdict(float)
        for ranking in (lex, vec):
            for rank, i in enumerate(ranking):
                score[i] += 1.0 / (60 + rank + 1)
        return ranked_sessions(archive, sorted(score, key=lambda i: -score[i]))
    r = hybrid_candidates(archive, question, guarded, index, weights=weights)
    return ranked_sessions(archive, [c.id for c in r.found])


def evaluate(dataset: list[dict], k: int, weights: Weights, quiet: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        archive = SessionArchive(Path(tmp) / "state.db")
        load(dataset, archive)
        guarded = GuardedEmbedder(MiniLMEmbedder(MiniLMConfig()), timeout=120)
        start = time.perf_counter()
        n = reindex(archive, guarded)
        if not quiet:
            print(f"embedded {n} messages in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        index = VectorIndex(archive)
        hits: dict[str, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        order: dict[str, list[int]] = collections.defaultdict(list)
        misses: dict[str, list[str]] = collections.defaultdict(list)
        for item in dataset:
            variant = item.get("variant") or item["question_type"]
            for mode in MODES:
                ranked = run_mode(archive, guarded, index, item["question"], mode, weights)
                ok = any(s in item["answer_session_ids"] for s in ranked[:k])
                hits[variant][mode].append(int(ok))
                if not ok and mode == "hybrid":
                    misses[variant].append(f"{item['question_id']}: {ranked[:k]}")
                if item.get("outdated_session_ids") and mode == "hybrid":
                    cur = min((ranked.index(s) for s in item["answer_session_ids"] if s in ranked),
                              default=10**6)
                    old = min((ranked.index(s) for s in item["outdated_session_ids"]
                               if s in ranked), default=10**6)
                    order[variant].append(int(cur < old))
        archive.close()
    table = {v: {m: sum(x) / len(x) for m, x in per.items()} | {"n": len(per["hybrid"])}
             for v, per in hits.items()}
    for v, xs in order.items():
        table[v]["current_above_outdated"] = sum(xs) / len(xs)
    return {"k": k, "by_variant": table, "hybrid_misses": dict(misses)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dataset = json.loads(Path(args.dataset).read_text(encoding="utf-8"))
    report = evaluate(dataset, args.k, Weights())
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"session hit@{args.k} per variant ({len(dataset)} questions)")
    print(f"  {'variant':<18} {'n':>3} " + " ".join(f"{m:>8}" for m in MODES))
    for variant, row in report["by_variant"].items():
        extra = (f"   current above outdated: {row['current_above_outdated']:.2f}"
                 if "current_above_outdated" in row else "")
        print(f"  {variant:<18} {row['n']:>3} " + " ".join(f"{row[m]:>8.2f}" for m in MODES)
              + extra)
    for variant, misses in report["hybrid_misses"].items():
        for m in misses:
            print(f"  hybrid miss [{variant}] {m}")


if __name__ == "__main__":
    _ = CoreConfig  # the config model is imported so a broken install fails early
    main()
