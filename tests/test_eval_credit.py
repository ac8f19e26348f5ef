"""hermes-core eval credits evidence by identity: an item naming a session covers only that
session's units, whatever text it shares with others; text decides only for items without an id."""

from __future__ import annotations

import pytest

from hermes_core.plugins.eval.datasets import parse_dataset
from hermes_core.plugins.eval.metrics import covered_units, evidence_for, score_ranking, score_stack
from hermes_core.plugins.eval.retrieve import Item

#: templated sessions: every one says the same sentence shape, only the detail differs
TEMPLATE = "On my weekly visit to the market I picked up some fresh {} for the family dinner tonight"


def templated_conversation() -> dict:
    conv: dict = {"speaker_a": "Ana", "speaker_b": "Assistant"}
    for n, thing in enumerate(["apricots", "leeks", "sardines", "figs"], start=1):
        conv[f"session_{n}_date_time"] = f"10:00 am on {n} May, 2024"
        conv[f"session_{n}"] = [
            {"speaker": "Ana", "dia_id": f"D{n}:1", "text": TEMPLATE.format(thing)},
            {"speaker": "Assistant", "dia_id": f"D{n}:2", "text": "Sounds lovely."}]
    return {"sample_id": "tpl", "conversation": conv,
            "qa": [{"question": "What fish did I buy at the market?", "answer": "sardines",
                    "evidence": ["D3:1"], "category": 4, "variant": "paraphrase"}]}


def test_a_templated_distractor_is_not_credited_through_its_session():
    data = parse_dataset([templated_conversation()])
    (case,) = data.cases
    (q,) = case.questions
    evidence = evidence_for(q, case)
    session_map = {"k1": "session_1", "k2": "session_2", "k3": "session_3", "k4": "session_4"}
    # session 1's turn shares 8+ consecutive words with the evidence turn: the text rule alone
    # would credit it; its session id says it is not the evidence
    distractor = Item(TEMPLATE.format("apricots"), session_id="k1")
    assert covered_units(Item(distractor.text), evidence, session_map) == {"D3:1"}
    assert covered_units(distractor, evidence, session_map) == set()
    # the evidence session covers its unit by identity, even with no text at all
    assert covered_units(Item("", session_id="k3"), evidence, session_map) == {"D3:1"}
    # a session the harness never stored (the question's own) covers nothing
    assert covered_units(Item(TEMPLATE.format("sardines"), session_id="eval-question-1"),
                         evidence, session_map) == set()
    scores = score_ranking([distractor, Item("", session_id="k2"), Item("", session_id="k3")],
                           evidence, session_map, [1, 3])
    assert (scores["recall@1"], scores["recall@3"], scores["by_text"]) == (0.0, 1.0, [])


def test_units_found_by_text_are_counted_as_such():
    data = parse_dataset([templated_conversation()])
    (case,) = data.cases
    evidence = evidence_for(case.questions[0], case)
    session_map = {"k3": "session_3"}
    prefetch_line = Item("- " + TEMPLATE.format("sardines"))
    assert score_ranking([prefetch_line], evidence, session_map, [1])["by_text"] == ["D3:1"]
    # the same unit found at the same rank by an id-carrying item counts as identity
    stack = score_stack([[prefetch_line], [Item("", session_id="k3")]], evidence, session_map, [1])
    assert (stack["recall@1"], stack["by_text"]) == (1.0, [])
    stack = score_stack([[prefetch_line], [Item("", session_id="zz")]], evidence, session_map, [1])
    assert (stack["recall@1"], stack["by_text"]) == (1.0, ["D3:1"])


def test_the_eval_librarys_old_home_warns_and_still_resolves():
    import hermes_core.eval as old
    from hermes_core.plugins.eval.run import run_eval

    with pytest.warns(DeprecationWarning, match="moved to hermes_core.plugins.eval.run.run_eval"):
        assert old.run_eval is run_eval
