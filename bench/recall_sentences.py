"""Offline measurement: does scoring a message by its best sentence find what one vector per
message misses? (issue 19: implied preferences and paraphrases buried in longer messages.)

No product change: the message vectors are the archive's own (``reindex``); each embedded
message of more than one sentence gets one vector per sentence here, in memory. Per question,
session-level ranks under

* ``msg``: each message ranked by the cosine of its own vector (what recall_paraphrase.py calls
  "vectors");
* ``sent``: each message ranked by its best sentence's cosine (a one-sentence message: its own);
* ``max``: the larger of the two;
* ``hybrid``: hybrid.py's fusion as it is (message cosines);
* ``hybrid_max``: the same fusion with ``max`` in place of the message cosine everywhere the
  fusion reads a similarity (nearest neighbours and the lexical candidates' similarities; the
  supersession's topic test still compares message vectors).

One rule for every set and question (no weights fitted). Reports hit@1 / hit@k / recall@k per
variant, and the sentence counts per message over the sets (and, with ``--corpus N``, over the
first N messages of bench/session_corpus.py's corpus that get a vector).

    python bench/recall_sentences.py examples/eval/paraphrase.json examples/eval/paraphrase-b.json
    python bench/recall_sentences.py --split clauses FILE ...   # commas before a conjunction too
    python bench/recall_sentences.py --user-only FILE ...   # sentence vectors for user messages
    python bench/recall_sentences.py --corpus 20000   # sentences per message of the bench corpus
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from recall_paraphrase import load, ranked_sessions
from session_corpus import Corpus

from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.hybrid import hybrid_candidates
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex
from hermes_core.plugins.memory.session_archive.vectors import reindex

MODES = ("msg", "sent", "max", "hybrid", "hybrid_max")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\s*\n+\s*")
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\s*\n+\s*|,\s+(?=(?:but|and|so|because|though|although|"
                     r"which|since|as|while)\b)")
#: a piece shorter than this many words is joined to the next (a "Thanks!" is not a sentence
#: worth a vector)
MIN_WORDS = 3


def split(text: str, how: str = "sentences") -> list[str]:
    """The sentences (or clauses) of ``text``; pieces under :data:`MIN_WORDS` words are joined
    to the next one."""
    parts = [p for p in (_CLAUSE if how == "clauses" else _SENTENCE).split(text.strip()) if p]
    out: list[str] = []
    carry = ""
    for p in parts:
        p = f"{carry} {p}".strip() if carry else p
        if len(p.split()) < MIN_WORDS:
            carry = p
            continue
        out.append(p)
        carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out


class SentenceScores:
    """Duck-types the parts of VectorIndex that hybrid_candidates reads, scoring each message
    by ``max`` (or ``sent``) instead of its own cosine; message vectors for everything else."""

    def __init__(self, base: VectorIndex, owners: np.ndarray, mat: np.ndarray,
                 how: str) -> None:
        self.base, self.owners, self.mat, self.how = base, owners, mat, how
        self.ids = base.ids.copy()
        self.pos = {int(i): k for k, i in enumerate(self.ids.tolist())}
        self.msg = np.stack([v for _, v in sorted(base.vectors(self.ids.tolist()).items())])
        self.owner_pos = np.array([self.pos[int(o)] for o in owners], dtype=np.int64)
        self.complete = base.complete

    def __len__(self) -> int:
        return len(self.base)

    def refresh(self, dimension: int, *, wait: bool = True) -> bool:
        return True

    def scores(self, qv: np.ndarray) -> np.ndarray:
        msg = self.msg @ qv
        best = np.full(len(msg), -2.0, dtype=np.float32)
        if len(self.mat):
            np.maximum.at(best, self.owner_pos, self.mat @ qv)
        if self.how == "msg":
            return msg
        single = best == -2.0  # one-sentence messages: their own vector is their sentence
        best[single] = msg[single]
        return best if self.how == "sent" else np.maximum(msg, best)

    def nearest(self, qv: np.ndarray, k: int, exclude: set[int] | None = None, *,
                threads: int = 2) -> list[tuple[int, float]]:
        s = self.scores(np.asarray(qv, dtype=np.float32))
        order = np.lexsort((-self.ids, -s))
        out = [(int(self.ids[p]), float(s[p])) for p in order
               if not exclude or int(self.ids[p]) not in exclude]
        return out[:k]

    def similarities(self, qv: np.ndarray, ids: list[int]) -> dict[int, float]:
        s = self.scores(np.asarray(qv, dtype=np.float32))
        return {i: float(s[self.pos[i]]) for i in ids if i in self.pos}

    def vectors(self, ids: list[int]) -> dict[int, Any]:
        return self.base.vectors(ids)


def evaluate(dataset: list[dict], k: int, how: str, model: MiniLMEmbedder,
             counts: collections.Counter, user_only: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        archive = SessionArchive(Path(tmp) / "state.db")
        load(dataset, archive)
        guarded = GuardedEmbedder(model, timeout=300)
        reindex(archive, guarded)
        index = VectorIndex(archive, rescore=10**6)
        index.refresh(guarded.dimension)
        ids = index.ids.tolist()
        stored = archive.db.read(
            f"SELECT id, role, content FROM messages WHERE id IN ({','.join('?' * len(ids))})",
            tuple(ids))
        texts = {i: c for i, role, c in stored if not user_only or role == "user"}
        owners: list[int] = []
        pieces: list[str] = []
        for i in ids:
            if i not in texts:
                continue
            parts = split(str(texts[i]), how)
            counts[len(parts)] += 1
            if len(parts) > 1:
                owners.extend([i] * len(parts))
                pieces.extend(parts)
        mat = (np.asarray(guarded.embed(pieces), dtype=np.float32) if pieces
               else np.zeros((0, guarded.dimension), dtype=np.float32))
        print(f"  {len(ids)} messages, {len(pieces)} sentence vectors", file=sys.stderr)
        idx = {m: SentenceScores(index, np.asarray(owners, dtype=np.int64), mat, m)
               for m in ("msg", "sent", "max")}
        rows: dict[str, dict[str, list[tuple[int, int, float]]]] = collections.defaultdict(
            lambda: collections.defaultdict(list))
        ranks: dict[str, dict[str, int]] = {}
        for item in dataset:
            variant = item.get("variant") or item["question_type"]
            evidence = item["answer_session_ids"]
            qv = np.asarray(guarded.embed([item["question"]]), dtype=np.float32)[0]
            for mode in MODES:
                if mode in ("msg", "sent", "max"):
                    ranked = ranked_sessions(archive, [i for i, _ in idx[mode].nearest(qv, 10**6)])
                else:
                    use: Any = index if mode == "hybrid" else idx["max"]
                    r = hybrid_candidates(archive, item["question"], guarded, use)
                    ranked = ranked_sessions(archive, [c.id for c in r.found])
                first = min((ranked.index(s) for s in evidence if s in ranked), default=10**6)
                rows[variant][mode].append((int(first == 0), int(first < k),
                                            sum(s in ranked[:k] for s in evidence)
                                            / len(evidence)))
                ranks.setdefault(item["question_id"], {})[mode] = first + 1 if first < 50 else 0
        archive.close()
    table = {v: {m: tuple(round(sum(x[j] for x in xs) / len(xs), 3) for j in range(3))
                 for m, xs in per.items()} | {"n": len(per["msg"])}
             for v, per in rows.items()}
    return {"by_variant": table, "ranks": ranks}


def corpus_counts(n: int, how: str) -> collections.Counter:
    """Sentences per embedded message (user and assistant) over the first ``n`` such messages
    of the benchmark corpus."""
    counts: collections.Counter = collections.Counter()
    seen = 0
    for _sid, msgs in Corpus().sessions():
        for m in msgs:
            if m.role not in ("user", "assistant") or not m.content:
                continue
            counts[len(split(m.content, how))] += 1
            seen += 1
            if seen >= n:
                return counts
    return counts


def describe(counts: collections.Counter) -> str:
    total = sum(counts.values())
    vectors = sum(c * (s if s > 1 else 0) for s, c in counts.items())
    multi = sum(c for s, c in counts.items() if s > 1)
    mean = sum(s * c for s, c in counts.items()) / total
    return (f"{total} messages, mean {mean:.2f} sentences, {multi / total:.0%} with more than "
            f"one; sentence vectors if only those get them: {vectors / total:.2f} per message")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="*")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--split", choices=("sentences", "clauses"), default="sentences")
    parser.add_argument("--corpus", type=int, default=0, help="count sentences over N corpus "
                        "messages")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--user-only", action="store_true",
                        help="sentence vectors for user messages only (self-disclosures)")
    args = parser.parse_args()
    model = MiniLMEmbedder(MiniLMConfig())
    report: dict[str, Any] = {}
    for path in args.datasets:
        counts: collections.Counter = collections.Counter()
        print(f"{path}:", file=sys.stderr)
        out = evaluate(json.loads(Path(path).read_text(encoding="utf-8")), args.k, args.split,
                       model, counts, args.user_only)
        out["sentences"] = describe(counts)
        report[path] = out
        if args.json:
            continue
        print(f"{path} ({args.split}): hit@1 / hit@{args.k} / recall@{args.k}; {out['sentences']}")
        print(f"  {'variant':<18} {'n':>3} " + " ".join(f"{m:>16}" for m in MODES))
        for variant, row in out["by_variant"].items():
            print(f"  {variant:<18} {row['n']:>3} " + " ".join(
                f"{row[m][0]:>6.2f}/{row[m][1]:.2f}/{row[m][2]:.2f}" for m in MODES))
        if args.verbose:
            for qid, r in out["ranks"].items():
                if len(set(r.values())) > 1:
                    print(f"    {qid:<22} " + " ".join(f"{m} {r[m]}" for m in MODES))
        sys.stdout.flush()
    if args.corpus:
        report["corpus"] = describe(corpus_counts(args.corpus, args.split))
        if not args.json:
            print(f"bench corpus: {report['corpus']}")
    if args.json:
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
