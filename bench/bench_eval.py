"""``hermes-core eval`` speed: ingest rate through the full default stack, time per question, and
the projection for a LongMemEval-S-sized run against the 60-minute target of issue 18.

Prints figures and their ratio to the target (ratio < 1.0 means the target is met); asserts nothing.

    python bench/bench_eval.py [--questions 4] [--sessions 50] [--messages 10]

A sample of LongMemEval-S shape is generated (each question its own haystack of ``--sessions``
sessions of ``--messages`` messages, user and assistant alternating, ~900 characters each, about
the size of LongMemEval-S's ~115k-token haystacks), and evaluated with the default stack
(file_memory, session_archive, skills; compressor) exactly as ``hermes-core eval`` does: a scratch
home per question, ingest through the agent loop with the worker settled after every turn, then
retrieval. Scratch homes go to the system temp folder and, side by side, to /dev/shm (tmpfs) when
it exists: on a disk shared with other jobs, SQLite's commit syncs dominate.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from hermes_core.plugins.eval.datasets import parse_dataset
from hermes_core.plugins.eval.run import EvalOptions, run_eval
from hermes_core.plugins.eval.stack import StackSpec

TARGET_MINUTES = 60.0
FULL_QUESTIONS = 500
WORDS = ["deploy", "cache", "router", "queue", "ledger", "postgres", "index", "vacuum", "shipment",
         "depot", "latency", "budget", "kernel", "plugin", "memory", "archive", "session",
         "search", "summary", "window", "prompt", "token", "editor", "garden", "recipe", "holiday",
         "train", "bicycle", "coffee", "laptop", "wedding", "tutor", "lesson", "invoice", "backup",
         "cluster", "replica", "migration", "schema", "report", "dashboard", "alert", "pager",
         "incident", "review", "sprint"]


def sentence(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words).capitalize() + "."


def sample(questions: int, sessions: int, messages: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    data = []
    for q in range(questions):
        ids = [f"q{q}-s{s}" for s in range(sessions)]
        haystack = []
        for s in range(sessions):
            turns = [{"role": "user" if m % 2 == 0 else "assistant",
                      "content": f"[{ids[s]}/{m}] " + sentence(rng, 900)} for m in range(messages)]
            haystack.append(turns)
        evidence = ids[rng.randrange(sessions)]
        data.append({
            "question_id": f"bench-{q}", "question_type": "single-session-user",
            "question": f"What did I say in {evidence}?", "answer": "x",
            "question_date": "2024/01/01 (Mon) 09:00",
            "haystack_session_ids": ids,
            "haystack_dates": [f"2023/{1 + s * 11 // sessions:02d}/{1 + s % 28:02d} (Mon) 10:00"
                               for s in range(sessions)],
            "haystack_sessions": haystack, "answer_session_ids": [evidence],
        })
    return data


def measure(data: list[dict[str, Any]], scratch: Path | None) -> dict[str, float]:
    dataset = parse_dataset(json.loads(json.dumps(data)))
    options = EvalOptions(ks=(1, 5, 10), scratch_root=scratch, case_timeout=3600)
    started = time.perf_counter()
    result = run_eval(dataset, StackSpec(None), options)
    wall = time.perf_counter() - started
    questions = result["questions"]
    failed = [q["failure"] for q in questions if not q["ok"]]
    if failed:
        raise SystemExit(f"a question failed: {failed[0]}")
    per_question = [(q["ingest"]["ms"] + q["retrieval_ms"]) / 1000 for q in questions]
    messages = sum(len(s) for q in data for s in q["haystack_sessions"])
    ingest_seconds = result["ingest"]["seconds"]
    return {
        "messages_per_s": messages / ingest_seconds,
        "user_turns_per_s": result["ingest"]["turns"] / ingest_seconds,
        "question_s_median": statistics.median(per_question),
        "retrieval_ms_median": statistics.median(q["retrieval_ms"] for q in questions),
        "wall_per_question_s": wall / len(questions),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--messages", type=int, default=10)
    args = parser.parse_args()
    data = sample(args.questions, args.sessions, args.messages)
    places: list[tuple[str, Path | None]] = [(f"temp folder ({tempfile.gettempdir()})", None)]
    if Path("/dev/shm").is_dir():
        places.append(("tmpfs (/dev/shm)", Path("/dev/shm")))
    print(f"sample: {args.questions} questions x {args.sessions} sessions x {args.messages} messages "
          f"(~900 characters each); default stack; worker settled after every turn")
    for label, scratch in places:
        m = measure(data, scratch)
        projected = m["wall_per_question_s"] * FULL_QUESTIONS / 60
        print(f"\nscratch homes in {label}")
        print(f"  ingest                      {m['messages_per_s']:8.1f} haystack messages/s "
              f"({m['user_turns_per_s']:.1f} user turns/s)")
        print(f"  per question (median)       {m['question_s_median']:8.2f} s  "
              f"(retrieval {m['retrieval_ms_median']:.1f} ms)")
        print(f"  projection, {FULL_QUESTIONS} questions    {projected:8.1f} min  ratio to target "
              f"{projected / TARGET_MINUTES:.2f} (target <= {TARGET_MINUTES:g} min)")


if __name__ == "__main__":
    main()
