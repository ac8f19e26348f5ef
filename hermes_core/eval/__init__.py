"""``hermes-core eval``: score any memory stack's recall on LongMemEval and LoCoMo, offline.

Modules, one role each: :mod:`.datasets` (reading and checking the two formats), :mod:`.ingest`
(a haystack through the real plugin stack), :mod:`.retrieve` (what the stack would give the model
for a question), :mod:`.metrics` (recall@k, hit@k, NDCG@k), :mod:`.judge` (answering and the
benchmarks' judge prompts), :mod:`.run` (the loop), :mod:`.report` (summaries and tables) and
:mod:`.stack` (the scratch home's config). docs/eval.md explains the numbers.
"""

from __future__ import annotations

from .datasets import Dataset, DatasetError, load_dataset, parse_dataset
from .report import build_report
from .run import EvalOptions, run_eval
from .stack import StackSpec

__all__ = ["Dataset", "DatasetError", "EvalOptions", "StackSpec", "build_report", "load_dataset",
           "parse_dataset", "run_eval"]
