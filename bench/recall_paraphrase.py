"""Offline recall on a set: word search vs vectors vs hybrid, per variant.

Reads a LongMemEval or LoCoMo file (as ``hermes-core eval`` does, with hermes-core's ``variant``
and ``outdated`` fields). Loads every distinct haystack session of the dataset into a fresh
archive (message timestamps from the session dates), embeds it with the local embedder, then
asks each question through ``hybrid_candidates`` in four modes and reports session-level hit@k
(an evidence session among the first k distinct sessions) per ``variant``:

* ``words``: the archive's word search alone (BM25, the fallbacks of query.py);
* ``vectors``: cosine similarity alone (each message ranked by its own vector, exactly, as the
  issue measured "embeddings of each turn alone");
* ``rrf``: naive reciprocal-rank fusion of the two (k=60), for comparison;
* ``hybrid``: the score fusion of hybrid.py (conversation scores, supersession).

Per variant and mode: hit@1, hit@k and the mean reciprocal rank of the first evidence session
(MRR, over the first 10 sessions), which separate two modes that both reach hit@3 = 1.00, and
recall@k (the share of a question's evidence sessions among the first k: what ``hermes-core
eval`` reports as R@k; it differs from hit@k only for questions with several evidence sessions).
For knowledge-update questions it also reports how often the current session ranks above the
outdated one (``outdated_session_ids``).

    python bench/recall_paraphrase.py examples/eval/paraphrase.json [--k 3] [--json] [--verbose]
    python bench/recall_paraphrase.py examples/eval/paraphrase-b.json   # the first held-out set
    python bench/recall_paraphrase.py examples/eval/paraphrase-c.json   # the second held-out set
    python bench/recall_paraphrase.py examples/eval/paraphrase-d.json   # the third
    python bench/recall_paraphrase.py examples/eval/paraphrase-e.json   # the fourth, written blind
    python bench/recall_paraphrase.py examples/eval/paraphrase-c.json --weight differs=false
                                        # one rule switched off (any field of hybrid.Policy)
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from hermes_core.config import CoreConfig
from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.hybrid import Policy, hybrid_candidates
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex
from hermes_core.plugins.memory.session_archive.vectors import reindex
from hermes_core.types import Message, Session

MODES = ("words", "vectors", "rrf", "hybrid")


def _when(text: str) -> float:
    return datetime.strptime(text.split(" (")[0] + text.split(")")[-1], "%Y/%m/%d %H:%M").timestamp()


def read_questions(path: str | Path) -> list[dict]:
    """Any file ``hermes-core eval`` reads (LongMemEval or LoCoMo, with hermes-core's ``variant``
    and ``outdated`` fields) as LongMemEval-shaped question dicts over shared sessions: LoCoMo's
    one conversation becomes its sessions (ids ``<sample_id>/session_<n>``) and each ``qa`` entry
    a question whose evidence and outdated sessions hold its dialogue ids."""
    from hermes_core.plugins.eval.datasets import load_dataset

    data = load_dataset(path)
    out = []
    for case in data.cases:
        prefix = f"{case.id}/" if data.format == "locomo" else ""
        sessions = case.sessions_in_date_order()
        for q in case.questions:
            if q.problem is not None:
                raise SystemExit(f"{path}: {q.problem}")
            out.append({
                "question_id": q.id, "question_type": q.type, "question": q.question,
                "variant": q.variant,
                "haystack_session_ids": [prefix + s.id for s in sessions],
                "haystack_dates": [s.date.strftime("%Y/%m/%d (%a) %H:%M") if s.date else
                                   "1970/01/01 (Thu) 00:00" for s in sessions],
                "haystack_sessions": [[{"role": t.role, "content": t.content} for t in s.turns]
                                      for s in sessions],
                "answer_session_ids": [prefix + e for e in q.evidence_sessions],
                "outdated_session_ids": [prefix + e for e in q.outdated_sessions],
            })
    return [q for q in out if q["answer_session_ids"]]


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


def run_mode(archive, guarded, index, question: str, mode: str, weights: Policy) -> list[str]:
    if mode == "words":
        r = hybrid_candidates(archive, question, None, None)
        return ranked_sessions(archive, [c.id for c in r.found])
    if mode == "vectors":
        return ranked_sessions(archive, _nearest(guarded, index, question))
    if mode == "rrf":
        lex = [c.id for c in hybrid_candidates(archive, question, None, None).found]
        vec = _nearest(guarded, index, question)
        score: dict[int, float] = collections.defaultdict(float)
        for ranking in (lex, vec):
            for rank, i in enumerate(ranking):
                score[i] += 1.0 / (60 + rank + 1)
        return ranked_sessions(archive, sorted(score, key=lambda i: -score[i]))
    r = hybrid_candidates(archive, question, guarded, index, weights=weights)
    return ranked_sessions(archive, [c.id for c in r.found])


def shown_beside(archive, guarded, index, question: str, weights: Policy, k: int) -> set[str]:
    """The sessions named beside the first k (``newer``: a later conversation that looks like
    an update of one of them; the search tool shows it with that result)."""
    r = hybrid_candidates(archive, question, guarded, index, weights=weights)
    top: list[int] = []
    for c in r.found:
        if c.chain not in top:
            top.append(c.chain)
    return set(ranked_sessions(archive, [r.newer[ch][1] for ch in top[:k] if ch in r.newer]))


def _nearest(guarded, index, question: str) -> list[int]:
    """Every message ranked by the cosine of its own vector (exact: all are rescored)."""
    import numpy as np

    qv = np.asarray(guarded.embed([question]), dtype=np.float32)[0]
    return [i for i, _ in index.nearest(qv, 1000)]


def evaluate(dataset: list[dict], k: int, weights: Policy, quiet: bool = False,
             embedder: dict | None = None) -> dict:
    """``embedder``: fields of the local embedder's MiniLMConfig (e.g. ``runtime``)."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = SessionArchive(Path(tmp) / "state.db")
        load(dataset, archive)
        local = MiniLMEmbedder(MiniLMConfig(**(embedder or {})))
        guarded = GuardedEmbedder(local, timeout=600)  # busy machines
        start = time.perf_counter()
        n = reindex(archive, guarded)
        if not quiet:
            print(f"embedded {n} messages in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        index = VectorIndex(archive, rescore=10**6)  # small sets: every vector rescored
        index.refresh(guarded.dimension)
        hits: dict[str, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        firsts: dict[str, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        rr: dict[str, dict[str, list[float]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        recall: dict[str, dict[str, list[float]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        order: dict[str, dict[str, list[int]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        misses: dict[str, list[str]] = collections.defaultdict(list)
        shown: dict[str, list[int]] = collections.defaultdict(list)
        ranks: dict[str, dict[str, int]] = collections.defaultdict(dict)
        for item in dataset:
            variant = item.get("variant") or item["question_type"]
            for mode in MODES:
                ranked = run_mode(archive, guarded, index, item["question"], mode, weights)
                ok = any(s in item["answer_session_ids"] for s in ranked[:k])
                hits[variant][mode].append(int(ok))
                evidence = item["answer_session_ids"]
                recall[variant][mode].append(
                    sum(s in ranked[:k] for s in evidence) / len(evidence))
                firsts[variant][mode].append(int(bool(ranked) and
                                                 ranked[0] in item["answer_session_ids"]))
                cur = min((ranked.index(s) for s in item["answer_session_ids"] if s in ranked),
                          default=10**6)
                rr[variant][mode].append(1.0 / (cur + 1) if cur < 10 else 0.0)
                ranks[item["question_id"]][mode] = cur + 1 if cur < 10 else 0
                if not ok and mode == "hybrid":
                    misses[variant].append(f"{item['question_id']}: {ranked[:k]}")
                if item.get("outdated_session_ids"):
                    old = min((ranked.index(s) for s in item["outdated_session_ids"]
                               if s in ranked), default=10**6)
                    order[variant][mode].append(int(cur < old))
                    if mode == "hybrid":  # the current statement listed, or named beside
                        beside = shown_beside(archive, guarded, index, item["question"], weights, k)
                        shown[variant].append(int(ok or bool(set(evidence) & beside)))
        archive.close()
    def mean(xs: list) -> float:
        return sum(xs) / len(xs)

    table = {v: {m: mean(x) for m, x in per.items()} | {"n": len(per["hybrid"])}
             | {f"{m}@1": mean(x) for m, x in firsts[v].items()}
             | {f"{m}_mrr": mean(x) for m, x in rr[v].items()}
             | {f"{m}_recall": mean(x) for m, x in recall[v].items()}
             for v, per in hits.items()}
    for v, per_mode in order.items():
        for m, xs in per_mode.items():
            table[v][f"{m}_current_above_outdated"] = mean(xs)
    for v, xs in shown.items():
        table[v]["hybrid_current_shown"] = mean(xs)
    return {"k": k, "by_variant": table, "hybrid_misses": dict(misses),
            "ranks": {q: r for q, r in ranks.items() if set(r.values()) != {1}}}


def weights_from(pairs: list[str]) -> Policy:
    """``Policy()`` with ``FIELD=VALUE`` overrides (a bool, int or float, as the field is)."""
    changes: dict[str, object] = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        if name not in Policy.__dataclass_fields__:
            raise SystemExit(f"--weight {pair}: no such field of Policy "
                             f"({', '.join(Policy.__dataclass_fields__)})")
        kind = type(getattr(Policy(), name))
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise SystemExit(f"--weight {pair}: {name} is true or false")
            changes[name] = text.lower() == "true"
        else:
            try:
                changes[name] = kind(text)
            except ValueError:
                raise SystemExit(f"--weight {pair}: {name} is a number") from None
    return replace(Policy(), **changes)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="ranks per question")
    parser.add_argument("--weight", action="append", default=[], metavar="FIELD=VALUE",
                        help="a field of hybrid.Policy, e.g. differs=false (repeatable)")
    args = parser.parse_args()
    dataset = read_questions(args.dataset)
    report = evaluate(dataset, args.k, weights_from(args.weight))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"session hit@1 / hit@{args.k} / MRR per variant ({len(dataset)} questions)")
    print(f"  {'variant':<18} {'n':>3} " + " ".join(f"{m:>16}" for m in MODES))
    for variant, row in report["by_variant"].items():
        print(f"  {variant:<18} {row['n']:>3} " + " ".join(
            f"{row[m + '@1']:>4.2f}/{row[m]:.2f}/{row[m + '_mrr']:.2f}" for m in MODES))
        if any(row[m + "_recall"] != row[m] for m in MODES):
            print(f"  {f'  recall@{args.k}':<22} " + " ".join(
                f"{row[m + '_recall']:>16.2f}" for m in MODES))
        if "hybrid_current_above_outdated" in row:
            print(f"  {'  current > outdated':<22} " + " ".join(
                f"{row[m + '_current_above_outdated']:>16.2f}" for m in MODES))
    if args.verbose:
        print("  first evidence rank per question (0: not in the first 10), where not all 1:")
        for qid, r in report["ranks"].items():
            print(f"    {qid:<22} " + " ".join(f"{m} {r[m]}" for m in MODES))
    for variant, misses in report["hybrid_misses"].items():
        for m in misses:
            print(f"  hybrid miss [{variant}] {m}")


if __name__ == "__main__":
    _ = CoreConfig  # the config model is imported so a broken install fails early
    main()
