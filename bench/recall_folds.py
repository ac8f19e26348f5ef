"""The recall protocol: every development set as a fold, the worst fold, and the default's checks.

Each set (a LongMemEval or LoCoMo file with hermes-core's ``variant`` field: exact, paraphrase,
preference, update; ``outdated`` for updates) is loaded into its own fresh archive, embedded with
the local embedder, and every question is asked in three modes (see bench/recall_paraphrase.py):
``words`` (the word search alone), ``vectors`` (each message by its own vector) and ``hybrid``
(the archive's default fusion, or ``--weight`` overrides). Evidence is credited by identity: the
archive ranks sessions, and a question is a hit at k when one of its evidence sessions is among
the first k distinct sessions (no text matching at all).

It prints, per fold and kind, hit@k of each mode; for updates, the share where the hybrid ranks
the current statement above the outdated one, and the share where the current statement is among
the first k or named beside one of them (``newer``, what session_search shows); then the worst
fold per kind, and the protocol's verdicts:

* on every fold and kind, the default at least matches words alone and vectors alone (within
  ``--tolerance``, 0.02);
* exact-word questions at least 0.98 on every fold;
* on the worst fold: paraphrase >= 0.9, preference >= 0.8, update >= 0.9, and the current
  statement above the outdated one in >= 0.9 of updates.

A weight or rule enters the default only if it improves the worst fold and loses on no kind in any
fold (compare two runs, one with ``--weight``). ``--blind FILE`` adds the blind set's row, printed
last and never used for a choice: run it once, at the end of a piece of work.

    python bench/recall_folds.py examples/eval/dev/*.json [--k 3] [--weight FIELD=VALUE] [--json]
    python bench/recall_folds.py examples/eval/dev/*.json --blind examples/eval/blind/blind.json
    python bench/recall_folds.py examples/eval/dev/*.json --embedder runtime=onnxruntime \
        --embedder quantize=true     # the local embedder's settings (embedder_minilm fields)

Nothing is faked (the local embedder, real archives in a temporary folder); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_paraphrase import evaluate, read_questions, weights_from

KINDS = ("exact", "paraphrase", "preference", "update")
MODES = ("words", "vectors", "hybrid")
TARGETS = {"exact": 0.98, "paraphrase": 0.9, "preference": 0.8, "update": 0.9}
CURRENT_FIRST = 0.9


def embedder_from(args: list[str]) -> dict:
    """``FIELD=VALUE`` pairs as the embedder's config (values read as YAML: true, 2, numpy)."""
    import yaml

    return {field: yaml.safe_load(value) for field, _, value in (a.partition("=") for a in args)}


def fold(path: Path, k: int, weights_args: list[str], embedder: dict | None = None) -> dict:
    questions = read_questions(path)
    started = time.perf_counter()
    report = evaluate(questions, k, weights_from(weights_args), quiet=True, embedder=embedder)
    rows = {}
    for kind, row in report["by_variant"].items():
        rows[kind] = {"n": row["n"], **{m: round(row[m], 4) for m in MODES}}
        if "hybrid_current_above_outdated" in row:
            rows[kind]["current_above_outdated"] = round(row["hybrid_current_above_outdated"], 4)
            rows[kind]["current_shown"] = round(row["hybrid_current_shown"], 4)
    return {"set": path.name, "questions": len(questions), "kinds": rows,
            "seconds": round(time.perf_counter() - started, 1)}


def verdicts(folds: list[dict], tolerance: float) -> tuple[dict, list[str]]:
    worst: dict[str, dict] = {}
    failures = []
    for f in folds:
        for kind, row in f["kinds"].items():
            for mode in ("words", "vectors"):
                if row["hybrid"] < row[mode] - tolerance:
                    failures.append(f"{f['set']} {kind}: default {row['hybrid']:.2f} < {mode} "
                                    f"alone {row[mode]:.2f}")
            if kind == "exact" and row["hybrid"] < TARGETS["exact"]:
                failures.append(f"{f['set']} exact: {row['hybrid']:.2f} < 0.98")
            if kind not in worst or row["hybrid"] < worst[kind]["hybrid"]:
                worst[kind] = {"set": f["set"], **row}
    for kind, row in worst.items():
        if kind in TARGETS and row["hybrid"] < TARGETS[kind]:
            failures.append(f"worst fold {kind} ({row['set']}): {row['hybrid']:.2f} < "
                            f"{TARGETS[kind]}")
    currents = [(f["set"], f["kinds"]["update"]["current_above_outdated"]) for f in folds
                if "current_above_outdated" in f["kinds"].get("update", {})]
    if currents:
        name, share = min(currents, key=lambda c: c[1])
        worst["update"]["current_above_outdated_worst"] = share
        if share < CURRENT_FIRST:
            failures.append(f"worst fold update order ({name}): current above outdated {share:.2f} "
                            f"< {CURRENT_FIRST}")
    return worst, failures


WIDTH = 34


def _row(label: str, n: int, row: dict) -> str:
    cells = " ".join(f"{row[m]:>8.2f}" for m in MODES)
    extra = (f"   current>outdated {row['current_above_outdated']:.2f}, current listed or "
             f"named beside {row['current_shown']:.2f}") if "current_above_outdated" in row else ""
    return f"  {label:<{WIDTH}} {n:>4} {cells}{extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path, help="the development sets (one fold each)")
    parser.add_argument("--blind", type=Path, help="the blind set: reported last, never used")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--weight", action="append", default=[], metavar="FIELD=VALUE",
                        help="a field of the archive's hybrid Policy (repeatable)")
    parser.add_argument("--embedder", action="append", default=[], metavar="FIELD=VALUE",
                        help="a field of the local embedder's config, e.g. runtime=numpy (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = embedder_from(args.embedder)
    folds = []
    for path in args.sets:
        folds.append(fold(path, args.k, args.weight, embedder))
        print(f"  {path.name}: {folds[-1]['questions']} questions in {folds[-1]['seconds']} s",
              file=sys.stderr)
    worst, failures = verdicts(folds, args.tolerance)
    blind = fold(args.blind, args.k, args.weight, embedder) if args.blind else None
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"k": args.k, "weights": args.weight, "embedder": embedder,
                          "folds": folds, "worst": worst, "failures": failures, "blind": blind,
                          "load": load}, indent=2))
        return
    print(f"session hit@{args.k} by kind (evidence credited by session identity); "
          f"weights {args.weight or 'default'}; embedder {embedder or 'default'}; load {load:.1f}")
    print(f"  {'fold / kind':<{WIDTH}} {'n':>4} " + " ".join(f"{m:>8}" for m in MODES))
    for f in folds:
        for kind in [*KINDS, *sorted(set(f["kinds"]) - set(KINDS))]:
            if kind in f["kinds"]:
                print(_row(f"{f['set']} {kind}", f["kinds"][kind]["n"], f["kinds"][kind]))
    print("worst fold per kind:")
    for kind in [k for k in KINDS if k in worst]:
        print(_row(f"{kind} ({worst[kind]['set']})", worst[kind]["n"], worst[kind]))
    print("protocol: " + ("every check passes" if not failures else f"{len(failures)} checks fail"))
    for failure in failures:
        print(f"  FAIL {failure}")
    if blind is not None:
        print(f"blind set {blind['set']} (run once; not used for any choice):")
        for kind in [k for k in KINDS if k in blind["kinds"]]:
            print(_row(kind, blind["kinds"][kind]["n"], blind["kinds"][kind]))


if __name__ == "__main__":
    main()
