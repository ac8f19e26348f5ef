"""The reports of ``hermes-core eval --out`` the inspector shows as charts.

Reports live in ``$HERMES_CORE_HOME/eval/`` (``hermes-core eval DATASET --out
$HERMES_CORE_HOME/eval/NAME.json``). A listing reads each file's summary; a report is served
without its per-question haystacks, only what the charts need: recall per question type and k,
and the tokens each question's recall cost. A file that is not a report is listed with the
reason, never fatal: the folder is the user's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hermes_core.errors import HermesCoreError

__all__ = ["EVAL_DIR", "MAX_REPORT_BYTES", "BadReport", "list_runs", "read_run"]

#: the folder of the home holding eval reports
EVAL_DIR = "eval"
#: a report larger than this is refused (a 500-question LongMemEval report is about 20 MB)
MAX_REPORT_BYTES = 200 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.json$")
_REQUIRED = ("dataset", "k", "summary", "questions")


class BadReport(HermesCoreError):
    """A file in the eval folder is not a ``hermes-core eval --json`` report."""


def _load(path: Path) -> dict[str, Any]:
    size = path.stat().st_size
    if size > MAX_REPORT_BYTES:
        raise BadReport(f"{path.name} is {size} bytes, over the {MAX_REPORT_BYTES} bytes the "
                        "inspector reads")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadReport(f"{path.name} is not JSON ({exc}): write reports with "
                        "'hermes-core eval DATASET --out FILE'") from None
    missing = [key for key in _REQUIRED if not isinstance(data, dict) or key not in data]
    if missing:
        raise BadReport(f"{path.name} is not a hermes-core eval report (no "
                        f"{', '.join(missing)}): write reports with "
                        "'hermes-core eval DATASET --out FILE'")
    report: dict[str, Any] = data
    return report


def _overall(report: dict[str, Any]) -> dict[str, Any]:
    overall = report["summary"].get("overall", {})
    return overall if isinstance(overall, dict) else {}


def list_runs(folder: Path) -> list[dict[str, Any]]:
    """Every ``*.json`` of ``folder``, newest first: its summary, or ``error`` saying why not."""
    if not folder.is_dir():
        return []
    files = sorted((p for p in folder.iterdir() if p.is_file() and _NAME.match(p.name)),
                   key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
    runs: list[dict[str, Any]] = []
    for path in files:
        entry: dict[str, Any] = {"name": path.name, "modified": path.stat().st_mtime}
        try:
            report = _load(path)
        except BadReport as exc:
            entry["error"] = str(exc)
        else:
            overall = _overall(report)
            entry.update(dataset=report["dataset"], providers=report.get("providers", []),
                         engine=report.get("engine"), k=report["k"],
                         questions=overall.get("questions"),
                         recall={f"@{k}": overall.get(f"recall@{k}") for k in report["k"]})
        runs.append(entry)
    return runs


def read_run(folder: Path, name: str) -> dict[str, Any]:
    """What the charts of one report need; :class:`LookupError` for a name that is not there."""
    if not _NAME.match(name):
        raise BadReport(f"{name!r} is not a report name: use a file name from the list "
                        "(letters, digits, '.', '_', '-', ending in .json)")
    path = folder / name
    if not path.is_file():
        raise LookupError(f"no eval report {name!r} in the home's {EVAL_DIR}/ folder")
    report = _load(path)
    summary = report["summary"]
    types = [t for t in summary if t != "overall"] + (["overall"] if "overall" in summary else [])
    questions = [{"id": str(q.get("id", "")), "group": str(q.get("group", "")),
                  "tokens": q.get("tokens") if q.get("ok") else None,
                  **{f"recall@{k}": (q.get("scores") or {}).get(f"recall@{k}")
                     for k in report["k"]}}
                 for q in report["questions"] if isinstance(q, dict)]
    return {"name": name, "dataset": report["dataset"], "format": report.get("format"),
            "providers": report.get("providers", []), "engine": report.get("engine"),
            "k": report["k"], "types": types,
            "recall": {t: {f"@{k}": summary[t].get(f"recall@{k}") for k in report["k"]}
                       for t in types},
            "tokens_mean": {t: summary[t].get("tokens_mean") for t in types},
            "failed": _overall(report).get("failed"),
            "questions": questions}
