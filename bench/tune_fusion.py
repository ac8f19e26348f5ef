"""Choose the fusion's weights on some development sets and check the choice on the others.

A grid over fields of ``hybrid.Policy`` is scored on every set given (each loaded and embedded
once; the query embeddings are cached, so one configuration costs a fraction of a second). A
configuration's score on a set is how far it falls short of the recall protocol's targets
(recall@3: exact words 0.98, paraphrases 0.9, implied preferences 0.8, updates 0.9), summed over
variants; ties are broken by the hit@1 lost. It prints:

* leave-one-set-out: for each set, the configuration chosen on the others, and that set's
  shortfall with it against the current defaults (does a choice made elsewhere carry over?);
* the configuration chosen on all of them, per set;
* the recall protocol's verdict on every configuration (bench/recall_folds.py; session hit@3,
  evidence credited by session identity): on every set and kind at least words alone and vectors
  alone (within 0.02) and exact words at least 0.98, and no kind losing a question against the
  defaults; how many configurations pass, and the closest ones with their hit@3 per set and kind;
* with ``--held-out FILE``: that set's shortfall with the chosen configuration and with the
  defaults (a set never used for the choice: run it once, after the choice is made).

    python bench/tune_fusion.py examples/eval/dev/dev-{a,b,c}.json

Nothing is faked: the local embedder (the ``embeddings`` extra) and real archives in a temporary
folder. Nothing is asserted, and hybrid.py's defaults are not changed by it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_paraphrase import load, ranked_sessions, read_questions, run_mode

from hermes_core.embeddings import GuardedEmbedder
from hermes_core.plugins.embedders.minilm import MiniLMConfig, MiniLMEmbedder
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.plugins.memory.session_archive.hybrid import (
    Policy,
    hybrid_candidates,
)
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex
from hermes_core.plugins.memory.session_archive.vectors import reindex

#: the recall protocol's targets (bench/recall_folds.py), by the sets' ``variant``
TARGETS = {"exact": 0.98, "paraphrase": 0.9, "preference": 0.8, "update": 0.9}
CURRENT_FIRST = 0.0  # updates are shown beside, never reordered: not a ranking target
#: the protocol: the fusion at least matches each half within this, per set and kind
TOLERANCE = 0.02

#: the fields that change the ranking (the update rules only name a conversation beside another)
GRID: dict[str, list[Any]] = {
    "words": [0.1, 0.2, 0.3], "support": [0.0, 0.25, 0.5], "support_count": [1, 2],
}


class _Cached:
    """The local embedder with each text's vector kept: a grid asks the same questions often."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.name, self.model_id, self.dimension = inner.name, inner.model_id, inner.dimension
        self._seen: dict[str, Any] = {}

    def embed(self, texts: list[str]) -> list[Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            self._seen.update(zip(missing, self.inner.embed(missing), strict=True))
        return [self._seen[t] for t in texts]


@dataclass
class _Set:
    name: str
    questions: list[dict]
    archive: SessionArchive
    embedder: GuardedEmbedder
    index: VectorIndex
    #: session hit@3 of words alone and of vectors alone, per variant (the protocol's floor)
    alone: dict[str, dict[str, float]] = field(default_factory=dict)


def _open(path: Path, embedder: _Cached, folder: Path) -> _Set:
    questions = read_questions(path)
    archive = SessionArchive(folder / f"{path.stem}.db")
    load(questions, archive)
    guarded = GuardedEmbedder(embedder, timeout=600)
    reindex(archive, guarded)
    index = VectorIndex(archive, rescore=10**6)  # small sets: every vector rescored
    index.refresh(guarded.dimension)
    alone: dict[str, dict[str, list[float]]] = {}
    for item in questions:
        row = alone.setdefault(_variant(item), {"words": [], "vectors": []})
        for mode, hits in row.items():
            ranked = run_mode(archive, guarded, index, item["question"], mode, Policy())
            hits.append(float(any(e in ranked[:3] for e in item["answer_session_ids"])))
    return _Set(path.name, questions, archive, guarded, index,
                {v: {m: sum(xs) / len(xs) for m, xs in row.items()} for v, row in alone.items()})


def _variant(item: dict) -> str:
    return str(item.get("variant") or item["question_type"])


def measure(s: _Set, weights: Policy) -> dict[str, dict[str, float]]:
    """recall@3, session hit@3 and hit@1, (updates) current-above-outdated, and the number of
    questions (``n``) per variant."""
    per: dict[str, dict[str, list[float]]] = {}
    for item in s.questions:
        found = hybrid_candidates(s.archive, item["question"], s.embedder, s.index,
                                  weights=weights).found
        ranked = ranked_sessions(s.archive, [c.id for c in found])
        evidence = item["answer_session_ids"]
        row = per.setdefault(_variant(item), {"recall": [], "hit": [], "hit1": [], "current": []})
        row["recall"].append(sum(e in ranked[:3] for e in evidence) / len(evidence))
        row["hit"].append(float(any(e in ranked[:3] for e in evidence)))
        row["hit1"].append(float(bool(ranked) and ranked[0] in evidence))
        if item.get("outdated_session_ids"):
            now = min((ranked.index(e) for e in evidence if e in ranked), default=10**6)
            old = min((ranked.index(e) for e in item["outdated_session_ids"] if e in ranked),
                      default=10**6)
            row["current"].append(float(now < old))
    return {v: {k: sum(xs) / len(xs) for k, xs in row.items() if xs} | {"n": len(row["hit"])}
            for v, row in per.items()}


def protocol(s: _Set, m: dict[str, dict[str, float]], default: dict[str, dict[str, float]],
             ) -> tuple[int, int]:
    """(checks failed, questions lost against the defaults) on set ``s``: a kind below words
    alone or vectors alone (beyond :data:`TOLERANCE`), exact words below 0.98; and the questions
    a kind loses against ``default`` (the protocol: a change loses on no kind in any fold)."""
    failed = lost = 0
    for v, r in m.items():
        floor = max(s.alone[v].values()) - TOLERANCE
        failed += int(r["hit"] < floor - 1e-9) + int(v == "exact" and r["hit"] < TARGETS["exact"])
        lost += max(0, round((default[v]["hit"] - r["hit"]) * r["n"]))
    return failed, lost


def _hits(m: dict[str, dict[str, float]]) -> str:
    return " ".join(f"{v} {m[v]['hit']:.2f}" for v in TARGETS if v in m)


def shortfall(m: dict[str, dict[str, float]]) -> tuple[float, float]:
    """(how far below the targets, hit@1 lost), summed over variants."""
    short = sum(max(0.0, TARGETS.get(v, 0.0) - r["recall"]) for v, r in m.items())
    short += sum(max(0.0, CURRENT_FIRST - r["current"]) for r in m.values() if "current" in r)
    return round(short, 6), sum(1 - r["hit1"] for r in m.values())


def _total(scores: dict[str, tuple[float, float]], names: list[str]) -> tuple[float, float]:
    return (round(sum(scores[n][0] for n in names), 6), sum(scores[n][1] for n in names))


def _fmt(x: tuple[float, float]) -> str:
    return f"short {x[0]:.3f}, hit@1 lost {x[1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path, help="sets the choice is made on")
    parser.add_argument("--held-out", type=Path, help="a set only reported, after the choice")
    args = parser.parse_args()
    embedder = _Cached(MiniLMEmbedder(MiniLMConfig()))
    with tempfile.TemporaryDirectory() as tmp:
        sets = [_open(p, embedder, Path(tmp)) for p in args.sets]
        names = [s.name for s in sets]
        configs = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
        start = time.perf_counter()
        base = {s.name: measure(s, Policy()) for s in sets}
        scored: list[tuple[dict[str, Any], dict[str, tuple[float, float]]]] = []
        checked: list[tuple[tuple[int, int, float], dict[str, Any], dict[str, Any]]] = []
        for n, cfg in enumerate(configs, 1):
            w = replace(Policy(), **cfg)
            ms = {s.name: measure(s, w) for s in sets}
            scored.append((cfg, {name: shortfall(m) for name, m in ms.items()}))
            verdict = [protocol(s, ms[s.name], base[s.name]) for s in sets]
            hits = sum(r["hit"] * r["n"] for m in ms.values() for r in m.values())
            checked.append(((sum(f for f, _ in verdict), sum(lost for _, lost in verdict), -hits),
                            cfg, ms))
            if n % 250 == 0:
                print(f"  {n}/{len(configs)} configurations, {time.perf_counter() - start:.0f} s",
                      file=sys.stderr)
        default = {name: shortfall(m) for name, m in base.items()}
        print(f"{len(configs)} configurations over {', '.join(names)}")
        print("defaults: " + "; ".join(f"{n} {_fmt(default[n])}" for n in names))
        if len(sets) > 1:
            print("leave one set out (chosen on the others, scored on it):")
            for held in names:
                rest = [n for n in names if n != held]
                cfg, sc = min(scored, key=lambda c: _total(c[1], rest))
                print(f"  {held}: {_fmt(sc[held])} (defaults {_fmt(default[held])}) with {cfg}")
        cfg, sc = min(scored, key=lambda c: _total(c[1], names))
        print(f"chosen on all: {cfg}")
        print("  " + "; ".join(f"{n} {_fmt(sc[n])}" for n in names))
        checked.sort(key=lambda c: c[0])
        passing = sum(1 for key, _, _ in checked if key[:2] == (0, 0))
        print(f"protocol (each kind >= words and vectors alone within {TOLERANCE}, exact >= "
              f"{TARGETS['exact']}, no kind losing a question against the defaults): "
              f"{passing} of {len(checked)} configurations pass; the closest:")
        for (failed, lost, _), cfg, ms in checked[:3]:
            print(f"  {cfg}: {failed} checks failed, {lost} questions lost")
            for s in sets:
                print(f"    {s.name}: {_hits(ms[s.name])} (defaults {_hits(base[s.name])})")
        if args.held_out is not None:
            held = _open(args.held_out, embedder, Path(tmp))
            chosen = shortfall(measure(held, replace(Policy(), **cfg)))
            print(f"held out {held.name}: {_fmt(chosen)} with the choice, "
                  f"{_fmt(shortfall(measure(held, Policy())))} with the defaults")
            held.archive.close()
        for s in sets:
            s.archive.close()


if __name__ == "__main__":
    main()
