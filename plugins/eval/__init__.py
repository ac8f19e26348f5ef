"""``hermes-core eval`` (built-in plugin ``eval``): score any memory stack's recall on LongMemEval
and LoCoMo, offline.

Modules, one role each: :mod:`.datasets` (reading and checking the two formats), :mod:`.ingest`
(a haystack through the real plugin stack), :mod:`.retrieve` (what the stack would give the model
for a question), :mod:`.metrics` (recall@k, hit@k, NDCG@k), :mod:`.judge` (answering and the
benchmarks' judge prompts), :mod:`.run` (the loop: :func:`~.run.run_eval`), :mod:`.report`
(summaries and tables), :mod:`.stack` (the scratch home's config) and :mod:`.commands` (the
command). docs/eval.md explains the numbers.

Loading the plugin imports only this module: the command and its library are imported when
``hermes-core eval`` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_core import hookimpl

__all__ = ["register_commands"]


@hookimpl
def register_commands(register: Callable[[Any], None]) -> None:
    from .commands import eval_command

    register(eval_command)
