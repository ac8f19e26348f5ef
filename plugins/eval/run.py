"""The evaluation loop: for each case, a scratch home, ingest, then every question's retrieval.

Each case (a LongMemEval question, a LoCoMo conversation) gets its own scratch home and its own
plugin host, built by the caller's ``make_host(home)``. The whole case runs on a worker thread
under ``case_timeout``: a provider that hangs where the kernel has no deadline yet (``on_message``,
``system_prompt_block``) fails that case's questions with the reason, and the run goes on with the
next case (the stuck thread is a daemon and holds only its own scratch host).

A question fails (``ok: false``, with ``failure``) when its entry in the file is wrong, when a
provider raised or the background work did not settle during ingest, when a retrieval source
raised or hung, when the case timed out, or when answering or judging failed. Failed questions are
counted apart and left out of the score averages.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_core import clock
from hermes_core.agent import Agent
from hermes_core.prefetch import PrefetchRunner
from hermes_core.replay import RecordingHost, ReplayLLM

from .ingest import IngestReport, ingest_case
from .judge import answer_question, judge_answer
from .metrics import Evidence, covered_units, evidence_for, score_ranking, score_stack, tokens
from .retrieve import Item, retrieve

if TYPE_CHECKING:
    from hermes_core.llm import LLM

    from .datasets import Case, Dataset, Question

__all__ = ["EvalOptions", "HostFactory", "run_eval"]

#: builds an un-activated host in a scratch home for a case id (the config selects the stack)
HostFactory = Callable[[Path, str], RecordingHost]
#: characters of one item's text kept in the JSON report
ITEM_CHARS = 600
#: the kernel's session ids (``new_session_id``: 20250301_142233_a1b2c3)
_KERNEL_ID = re.compile(r"\b\d{8}_\d{6}_[0-9a-f]{6}\b")


@dataclass
class EvalOptions:
    ks: Sequence[int] = (1, 3, 5, 10)
    limit: int | None = None
    #: bound for each retrieval source (prefetch and each tool), seconds
    deadline: float = 30.0
    #: bound for one whole case (ingest and all its questions), seconds
    case_timeout: float = 900.0
    #: bound for a provider's own background work after ingest (its ``settle``), seconds
    settle_timeout: float = 120.0
    tools: list[str] | None = None
    #: answer and judge with this model (``None``: retrieval metrics only)
    llm: LLM | None = None
    judge_llm: LLM | None = None
    context_chars: int = 60_000
    keep_homes: bool = False
    scratch_root: Path | None = None
    on_question: Callable[[dict[str, Any]], None] | None = None
    homes: list[str] = field(default_factory=list)


class _Ticker:
    """Reports each question once, as it finishes (from the case's thread), until closed."""

    def __init__(self, callback: Callable[[dict[str, Any]], None] | None) -> None:
        self.callback = callback
        self.lock = threading.Lock()
        self.done: set[int] = set()
        self.closed = False

    def __call__(self, record: dict[str, Any]) -> None:
        with self.lock:
            if self.closed or id(record) in self.done:
                return
            self.done.add(id(record))
        if self.callback is not None:
            self.callback(record)

    def close(self, records: list[dict[str, Any]], originals: list[dict[str, Any]]) -> None:
        """Stop the case's thread from reporting; report what it did not (``records`` may be
        copies of ``originals``)."""
        with self.lock:
            self.closed = True
            left = [r for r, o in zip(records, originals, strict=True) if id(o) not in self.done]
        if self.callback is not None:
            for record in left:
                self.callback(record)


def _question_stub(case: Case, q: Question) -> dict[str, Any]:
    return {
        "id": q.id, "case": case.id, "type": q.type, "variant": q.variant,
        "group": f"{q.type} / {q.variant}" if q.variant else q.type, "category": q.category,
        "question": q.question, "answer": q.answer, "question_date": q.date_text,
        "abstention": q.abstention, "evidence": q.evidence_turns or q.evidence_sessions,
        "notes": list(q.notes), "ok": False, "failure": None, "scores": None, "sources": [],
        "tokens": 0, "retrieval_ms": None,
    }


def _selected(dataset: Dataset, limit: int | None) -> list[tuple[Case, list[Question]]]:
    out: list[tuple[Case, list[Question]]] = []
    left = limit if limit is not None else None
    for case in dataset.cases:
        if left is not None and left <= 0:
            break
        qs = case.questions if left is None else case.questions[:left]
        if left is not None:
            left -= len(qs)
        out.append((case, qs))
    return out


def run_eval(dataset: Dataset, make_host: HostFactory, options: EvalOptions) -> dict[str, Any]:
    """Run every selected question; returns ``{"questions": [...], "ingest": {...}}`` (see report)."""
    results: list[dict[str, Any]] = []
    ingest_turns = 0
    ingest_seconds = 0.0
    started = time.perf_counter()
    for case, questions in _selected(dataset, options.limit):
        records = [_question_stub(case, q) for q in questions]
        originals = list(records)
        ticker = _Ticker(options.on_question)
        usable = [(q, r) for q, r in zip(questions, records, strict=True) if q.problem is None]
        for q, r in zip(questions, records, strict=True):
            if q.problem is not None:
                r["failure"] = f"dataset: {q.problem}"
                ticker(r)
        if usable:
            box: dict[str, Any] = {}
            thread = threading.Thread(target=_run_case_into, args=(box, dataset, case, usable, make_host,
                                                                  options, ticker),
                                      name=f"eval-{case.id}", daemon=True)
            thread.start()
            thread.join(options.case_timeout)
            if thread.is_alive():
                # the stuck thread keeps the old records: what it might still write is not reported
                records = [dict(r) for r in records]
                for r in records:
                    if not r["ok"] and r["failure"] is None:
                        r["failure"] = (f"timeout: the case did not finish within "
                                        f"{options.case_timeout:g} s (a provider hung?)")
            elif "error" in box:
                exc = box["error"]
                for _q, r in usable:
                    if not r["ok"] and r["failure"] is None:
                        r["scores"] = None
                        r["failure"] = f"setup: {type(exc).__name__}: {exc}"
            report: IngestReport | None = box.get("ingest")
            if report is not None:
                ingest_turns += report.turns
                ingest_seconds += report.seconds
        ticker.close(records, originals)
        results.extend(records)
    return {"questions": results,
            "ingest": {"turns": ingest_turns, "seconds": round(ingest_seconds, 3),
                       "turns_per_second": round(ingest_turns / ingest_seconds, 1)
                       if ingest_seconds > 0 else None},
            "seconds": round(time.perf_counter() - started, 3)}


def _run_case_into(box: dict[str, Any], dataset: Dataset, case: Case,
                   usable: list[tuple[Question, dict[str, Any]]], make_host: HostFactory,
                   options: EvalOptions, ticker: _Ticker) -> None:
    try:
        _run_case(box, dataset, case, usable, make_host, options, ticker)
    except BaseException as exc:  # reported on the questions, never raised into the run
        box["error"] = exc


def _run_case(box: dict[str, Any], dataset: Dataset, case: Case,
              usable: list[tuple[Question, dict[str, Any]]], make_host: HostFactory,
              options: EvalOptions, ticker: _Ticker) -> None:
    home = Path(tempfile.mkdtemp(prefix="hermes-core-eval-", dir=options.scratch_root))
    options.homes.append(str(home))
    host = make_host(home, case.id)
    llm = ReplayLLM(model="eval-haystack")
    agent: Agent | None = None
    runner: PrefetchRunner | None = None
    try:
        agent = Agent.create(host, llm)
        wanted = host.config.core.memory.providers
        missing = [n for n in wanted if f"memory-provider:{n}" not in host.instances]
        if missing:
            raise RuntimeError(f"memory provider(s) {', '.join(missing)} did not start (see the "
                               "log above)")
        report = ingest_case(case, agent, llm, host.writes, settle_timeout=options.settle_timeout)
        box["ingest"] = report
        ingest_failure = None
        if report.problems:
            ingest_failure = f"ingest: {report.problems[0]}"
        elif report.unsettled:
            ingest_failure = ("ingest: the background work (sync_turn, ...) did not settle within "
                              f"{agent.worker.drain_timeout:g} s (a provider hung?)")
        runner = PrefetchRunner(host, timeout=options.deadline)
        for n, (q, record) in enumerate(usable, start=1):
            record["ingest"] = {"sessions": report.sessions, "turns": report.turns,
                                "skipped_turns": report.skipped_turns,
                                "ms": round(report.seconds * 1000, 1)}
            if ingest_failure is not None:
                record["failure"] = ingest_failure
            else:
                _question(dataset, case, q, record, host, runner, report, options, n)
            ticker(record)
    finally:
        if runner is not None:
            runner.close()
        if agent is not None:
            agent.close()
        else:
            host.shutdown()
        if not options.keep_homes:
            shutil.rmtree(home, ignore_errors=True)


def _item_json(item: Item, evidence: list[Evidence], session_map: dict[str, str]) -> dict[str, Any]:
    """An item for the report; kernel session ids (they differ run to run) become dataset ids, so
    two runs' reports diff cleanly."""
    text = item.text[:ITEM_CHARS] + ("…" if len(item.text) > ITEM_CHARS else "")
    if session_map:
        text = _KERNEL_ID.sub(lambda m: f"<{session_map.get(m.group(0), m.group(0))}>", text)
    mapped = session_map.get(item.session_id) if item.session_id else None
    return {"text": text, "dataset_session": mapped,
            "session_id": item.session_id if item.session_id and mapped is None else None,
            "covers": sorted(covered_units(item, evidence, session_map))}


def _question(dataset: Dataset, case: Case, q: Question, record: dict[str, Any], host: RecordingHost,
              runner: PrefetchRunner, report: IngestReport, options: EvalOptions, n: int) -> None:
    # LongMemEval scores no retrieval for abstention questions: what they ask was never said
    evidence = [] if q.abstention and dataset.format == "longmemeval" else evidence_for(q, case)
    with clock.frozen_at(q.date):
        retrieval = retrieve(host, runner, q.question, session_id=f"eval-question-{n}",
                             attributes={"eval_question": q.id, "eval_date": q.date_text},
                             deadline=options.deadline, tools=options.tools)
    ks = list(options.ks)
    sources = []
    for s in retrieval.sources:
        sources.append({
            "source": s.source, "status": s.status, "error": s.error,
            "ms": round(s.seconds * 1000, 2) if s.seconds is not None else None,
            "tokens": tokens(s.text),
            "scores": score_ranking(s.items, evidence, report.session_map, ks) if evidence else None,
            "items": [_item_json(i, evidence, report.session_map) for i in s.items],
        })
    record["sources"] = sources
    record["tokens"] = sum(s["tokens"] for s in sources)
    record["retrieval_ms"] = round(retrieval.seconds * 1000, 2)
    record["scores"] = (score_stack([s.items for s in retrieval.sources], evidence, report.session_map, ks)
                        if evidence else None)
    failed = [s for s in retrieval.sources if s.failed]
    if failed:
        record["failure"] = f"retrieval: {failed[0].source} {failed[0].status}: {failed[0].error}"
        return
    if options.llm is not None:
        context = "\n\n".join(f"## {s.source}\n{s.text}" for s in retrieval.sources if s.text)
        try:
            hypothesis = answer_question(options.llm, q, context[: options.context_chars])
            verdict = judge_answer(options.judge_llm or options.llm, dataset.format, q, hypothesis)
        except Exception as exc:
            record["failure"] = f"answer: {type(exc).__name__}: {exc}"
            return
        record["answer_run"] = {"hypothesis": hypothesis, "correct": verdict.correct,
                                "judge_reply": verdict.reply}
    record["ok"] = True
