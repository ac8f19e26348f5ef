"""The three paraphrase sets under examples/eval/ are what their generators write, and hold what
their variants promise: an update's current statement comes after the outdated one, and in set
C a paraphrase shares no content word with its evidence (A and B were written with a looser
rule: a few of their paraphrases share an incidental word, "called", "home")."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hermes_core.semantic import query_words

EVAL = Path(__file__).resolve().parent.parent / "examples" / "eval"
sys.path.insert(0, str(EVAL))

import make_paraphrase_set  # noqa: E402
import paraphrase_b  # noqa: E402
import paraphrase_c  # noqa: E402

SETS = {"paraphrase.json": (make_paraphrase_set.SESSIONS, make_paraphrase_set.QUESTIONS),
        "paraphrase-b.json": (paraphrase_b.SESSIONS, paraphrase_b.QUESTIONS),
        "paraphrase-c.json": (paraphrase_c.SESSIONS, paraphrase_c.QUESTIONS)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_file_is_what_its_generator_writes(name: str) -> None:
    sessions, questions = SETS[name]
    on_disk = json.loads((EVAL / name).read_text(encoding="utf-8"))
    assert on_disk == make_paraphrase_set.build(sessions, questions)


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_variants_hold_what_they_promise(name: str) -> None:
    sessions, questions = SETS[name]
    for qid, _type, variant, question, _answer, evidence, outdated in questions:
        if variant == "paraphrase" and name == "paraphrase-c.json":
            said = set().union(*(query_words(text) for sid in evidence
                                 for _role, text in sessions[sid][1]))
            assert not set(query_words(question)) & said, qid
        for old in outdated:
            assert all(sessions[old][0] < sessions[new][0] for new in evidence), qid
