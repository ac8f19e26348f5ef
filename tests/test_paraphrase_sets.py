"""The five paraphrase sets under examples/eval/ are what their generators write, and hold what
their variants promise: an update's current statement comes after the outdated one, and in sets
C, D and E a paraphrase shares no content word with its evidence (A and B were written with a looser
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
import paraphrase_d  # noqa: E402
import paraphrase_e  # noqa: E402

SETS = {"paraphrase.json": (make_paraphrase_set.SESSIONS, make_paraphrase_set.QUESTIONS),
        "paraphrase-b.json": (paraphrase_b.SESSIONS, paraphrase_b.QUESTIONS),
        "paraphrase-c.json": (paraphrase_c.SESSIONS, paraphrase_c.QUESTIONS),
        "paraphrase-d.json": (paraphrase_d.SESSIONS, paraphrase_d.QUESTIONS),
        "paraphrase-e.json": (paraphrase_e.SESSIONS, paraphrase_e.QUESTIONS)}


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_file_is_what_its_generator_writes(name: str) -> None:
    sessions, questions = SETS[name]
    on_disk = json.loads((EVAL / name).read_text(encoding="utf-8"))
    assert on_disk == make_paraphrase_set.build(sessions, questions)


@pytest.mark.parametrize("name", sorted(SETS))
def test_the_variants_hold_what_they_promise(name: str) -> None:
    sessions, questions = SETS[name]
    for qid, _type, variant, question, _answer, evidence, outdated in questions:
        if variant == "paraphrase" and name != "paraphrase.json" and name != "paraphrase-b.json":
            said = set().union(*(query_words(text) for sid in evidence
                                 for _role, text in sessions[sid][1]))
            assert not set(query_words(question)) & said, qid
        for old in outdated:
            assert all(sessions[old][0] < sessions[new][0] for new in evidence), qid


def test_set_d_holds_the_updates_and_preferences_it_was_written_for() -> None:
    """D has at least eight knowledge updates, several of them stating the change with no word
    that says so, and at least eight preferences, some resting on two sessions."""
    from hermes_core.plugins.memory.session_archive.hybrid import states_change

    sessions, questions = paraphrase_d.SESSIONS, paraphrase_d.QUESTIONS
    updates = [q for q in questions if q[2] == "knowledge-update"]
    assert len(updates) >= 8
    silent = [q for q in updates
              if not any(states_change(text) for sid in q[5] for _role, text in sessions[sid][1])]
    assert len(silent) >= 4
    preferences = [q for q in questions if q[2] == "preference"]
    assert len(preferences) >= 8
    assert sum(len(q[5]) >= 2 for q in preferences) >= 2
