"""Summaries of an evaluation run: per question type, overall, per source; and their tables.

Averages are over *scored* questions: those that did not fail and have evidence. Failed questions
are counted in ``failed`` (with the first reasons in ``failures``); questions without evidence in
``no_evidence``. Accuracy (with ``--answer``) is over judged questions.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["build_report", "summarise", "tables"]

OVERALL = "overall"


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _metric_means(scores: list[dict[str, Any]], ks: Sequence[int]) -> dict[str, float | None]:
    """``recall@k``, ``hit@k`` and ``ndcg@k`` averaged over ``scores``, for each k."""
    return {f"{metric}@{k}": _mean([s[f"{metric}@{k}"] for s in scores])
            for k in ks for metric in ("recall", "hit", "ndcg")}


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def summarise(questions: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """One summary row for ``questions``."""
    failed = [q for q in questions if not q["ok"]]
    ok = [q for q in questions if q["ok"]]
    scored = [q for q in ok if q["scores"] is not None]
    row: dict[str, Any] = {
        "questions": len(questions), "failed": len(failed), "scored": len(scored),
        "no_evidence": sum(1 for q in ok if q["scores"] is None),
    }
    row.update(_metric_means([q["scores"] for q in scored], ks))
    # how much of the figures rests on the text fallback (items without a session id)
    row["units_found"] = sum(sum(1 for at in q["scores"]["found_at"].values() if at is not None)
                             for q in scored)
    row["units_found_by_text"] = sum(len(q["scores"].get("by_text", [])) for q in scored)
    row["tokens_mean"] = _mean([float(q["tokens"]) for q in ok])
    row["retrieval_ms_median"] = _median([q["retrieval_ms"] for q in ok
                                          if q["retrieval_ms"] is not None])
    row.update(_accuracy(ok))
    return row


def _accuracy(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """``accuracy`` and ``judged`` over the judged answers (nothing when none was judged)."""
    judged = [q["answer_run"]["correct"] for q in ok
              if q.get("answer_run") and q["answer_run"]["correct"] is not None]
    if not judged:
        return {}
    return {"accuracy": round(sum(judged) / len(judged), 4), "judged": len(judged)}


def _by_source(questions: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    names = sorted({s["source"] for q in questions for s in q["sources"]})
    return {name: _source_row(questions, name, ks) for name in names}


def _source_row(questions: Sequence[dict[str, Any]], name: str, ks: Sequence[int]) -> dict[str, Any]:
    """The summary row of source ``name`` over ``questions``."""
    entries = [s for q in questions if q["ok"] for s in q["sources"] if s["source"] == name]
    scored = [s for s in entries if s["scores"] is not None]
    # answers: the source said something; empty: it ran and had nothing (e.g. a prefetch
    # that is off), which is not a miss of its recall
    row: dict[str, Any] = {"answers": sum(1 for s in entries if s["status"] == "ok"),
                           "empty": sum(1 for s in entries if s["status"] == "empty"),
                           "scored": len(scored),
                           "errors": sum(1 for q in questions for s in q["sources"]
                                         if s["source"] == name and s["status"] not in ("ok", "empty"))}
    row.update(_metric_means([s["scores"] for s in scored], ks))
    row["tokens_mean"] = _mean([float(s["tokens"]) for s in entries])
    row["ms_median"] = _median([s["ms"] for s in entries if s["ms"] is not None])
    return row


def build_report(run: dict[str, Any], *, dataset: str, fmt: str, providers: list[str],
                 engine: str | None, ks: Sequence[int], answered: bool) -> dict[str, Any]:
    """The whole report (the ``--json`` document)."""
    questions = run["questions"]
    groups = sorted({q["group"] for q in questions})
    by_type = {g: summarise([q for q in questions if q["group"] == g], ks) for g in groups}
    return {
        "dataset": dataset, "format": fmt, "providers": providers, "engine": engine,
        "k": list(ks), "answered": answered,
        "summary": {OVERALL: summarise(questions, ks), **by_type},
        "sources": _by_source(questions, ks),
        "failures": [{"id": q["id"], "reason": q["failure"]} for q in questions if not q["ok"]],
        "ingest": run["ingest"], "seconds": run["seconds"],
        "questions": questions,
    }


def tables(report: dict[str, Any]) -> list[Any]:
    """rich Tables: one row per question type (and overall), then one row per source."""
    from rich.table import Table

    ks = report["k"]
    title = (f"{report['dataset']} ({report['format']}) — providers: "
             f"{', '.join(report['providers']) or 'none'}; engine: {report['engine'] or 'none'}")
    by_type = Table(title=title, title_justify="left")
    by_type.add_column("question type")
    for name in ("n", "failed"):
        by_type.add_column(name, justify="right")
    for k in ks:
        by_type.add_column(f"R@{k}", justify="right")
    by_type.add_column(f"hit@{ks[-1]}", justify="right")
    by_type.add_column(f"NDCG@{ks[-1]}", justify="right")
    by_type.add_column("tokens", justify="right")
    by_type.add_column("ms", justify="right")
    if report["answered"]:
        by_type.add_column("accuracy", justify="right")

    def fmt(value: Any, digits: int = 3) -> str:
        if value is None:
            return "-"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    rows = report["summary"]
    for name in [*[t for t in rows if t != OVERALL], OVERALL]:
        row = rows[name]
        cells = [name if name != OVERALL else "[bold]overall[/bold]", str(row["questions"]),
                 str(row["failed"])]
        cells += [fmt(row[f"recall@{k}"]) for k in ks]
        cells += [fmt(row[f"hit@{ks[-1]}"]), fmt(row[f"ndcg@{ks[-1]}"]), fmt(row["tokens_mean"], 0),
                  fmt(row["retrieval_ms_median"], 1)]
        if report["answered"]:
            cells.append(fmt(row.get("accuracy")))
        by_type.add_row(*cells)
    by_source = Table(title="per source (all question types)", title_justify="left")
    by_source.add_column("source")
    by_source.add_column("answers", justify="right")
    by_source.add_column("empty", justify="right")
    by_source.add_column("errors", justify="right")
    for k in ks:
        by_source.add_column(f"R@{k}", justify="right")
    by_source.add_column("tokens", justify="right")
    by_source.add_column("ms", justify="right")
    for name, row in report["sources"].items():
        by_source.add_row(name, str(row["answers"]), str(row["empty"]), str(row["errors"]),
                          *[fmt(row[f"recall@{k}"]) for k in ks], fmt(row["tokens_mean"], 0),
                          fmt(row["ms_median"], 1))
    return [by_type, by_source]
