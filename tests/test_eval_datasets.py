"""hermes-core eval: reading LongMemEval and LoCoMo files, and the errors for files that are wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_core.plugins.eval.datasets import LONGMEMEVAL_TYPES, DatasetError, load_dataset, parse_dataset


def lme_question(qid: str = "q1", qtype: str = "single-session-user", **over: object) -> dict:
    q: dict = {
        "question_id": qid, "question_type": qtype, "question": "Which editor do I use?",
        "answer": "Helix", "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/21 (Sun) 09:00", "2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [
            [{"role": "user", "content": "I use Helix now.", "has_answer": True},
             {"role": "assistant", "content": "Noted."}],
            [{"role": "user", "content": "Rice recipes?"}, {"role": "assistant", "content": "Fried rice."}],
        ],
        "answer_session_ids": ["s1"],
    }
    q.update(over)
    return q


def locomo_conversation() -> dict:
    return {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline", "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "That sounds brave.",
                 "img_url": ["http://example.invalid/x.jpg"], "blip_caption": "a photo of a lake"},
            ],
            "session_2_date_time": "7:55 pm on 9 June, 2023",
            "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": "I painted a sunrise."}],
        },
        "qa": [
            {"question": "When did Caroline go to the support group?", "answer": "7 May 2023",
             "evidence": ["D1:1"], "category": 2},
            {"question": "What did Melanie paint?", "answer": "A sunrise", "evidence": ["D2:1; D1:2"],
             "category": 4},
            {"question": "What did Caroline paint?", "adversarial_answer": "A sunrise",
             "evidence": ["D9:9"], "category": 5},
        ],
    }


def test_longmemeval_fields_dates_and_order():
    data = parse_dataset([lme_question(), lme_question("q2_abs", "multi-session")])
    assert data.format == "longmemeval" and len(data.cases) == 2
    case = data.cases[0]
    (q,) = case.questions
    assert (q.id, q.type, q.answer, q.evidence_sessions, q.abstention) == (
        "q1", "single-session-user", "Helix", ["s1"], False)
    assert q.date is not None and q.date.isoformat() == "2023-06-01T10:00:00+00:00"
    # ingest order is by date, not file order
    assert [s.id for s in case.sessions_in_date_order()] == ["s2", "s1"]
    assert case.sessions[0].turns[0].has_answer is True
    assert data.cases[1].questions[0].abstention is True


def test_locomo_sessions_speakers_evidence_and_categories():
    data = parse_dataset([locomo_conversation()])
    assert data.format == "locomo"
    (case,) = data.cases
    assert [s.id for s in case.sessions] == ["session_1", "session_2"]
    first = case.sessions[0].turns
    assert (first[0].role, first[0].speaker, first[0].turn_id) == ("user", "Caroline", "D1:1")
    assert first[1].role == "assistant" and "[shares a photo: a photo of a lake]" in first[1].content
    # Melanie opens session 2: there she plays the user, so her line is a user turn
    (opening,) = case.sessions[1].turns
    assert (opening.role, opening.speaker) == ("user", "Melanie")
    q1, q2, q3 = case.questions
    assert (q1.type, q1.category, q1.evidence_turns, q1.evidence_sessions) == (
        "temporal", 2, ["D1:1"], ["session_1"])
    # two ids in one string, as some published entries have
    assert q2.evidence_turns == ["D2:1", "D1:2"] and q2.evidence_sessions == ["session_2", "session_1"]
    assert q3.type == "adversarial" and q3.answer == "A sunrise" and q3.abstention
    assert q3.evidence_turns == [] and "D9:9" in q3.notes[0]
    assert q1.date is not None and q1.date.date().isoformat() == "2023-06-09"  # the last session


def test_wrong_role_names_question_index_id_and_path():
    bad = lme_question("abc")
    bad["haystack_sessions"][1][1]["role"] = "system"
    data = parse_dataset([lme_question("q1"), lme_question("q2"), bad])
    problem = data.cases[2].questions[0].problem
    assert problem == ("question 3 (id 'abc'): haystack_sessions[1][1].role: expected 'user' or "
                       "'assistant', got 'system'")
    assert data.cases[0].questions[0].problem is None  # the others are usable


@pytest.mark.parametrize(("change", "expected"), [
    ({"question_type": "single-hop"}, "question_type: unknown type 'single-hop'; expected one of "
                                      + ", ".join(LONGMEMEVAL_TYPES)),
    ({"haystack_dates": ["2023-05-21", "2023/05/20 (Sat) 02:21"]},
     "haystack_dates[0]: '2023-05-21' is not a date like '2023/05/20 (Sat) 02:21'"),
    ({"answer_session_ids": ["s9"]}, "answer_session_ids[0]: 's9' is not one of haystack_session_ids"),
    ({"haystack_session_ids": ["s1"]}, "must be parallel lists; their lengths are 1, 2 and 2"),
    ({"question": None}, "question: expected a string, got NoneType"),
])
def test_bad_fields_become_the_questions_problem(change, expected):
    data = parse_dataset([lme_question("ok"), lme_question("bad", **change)])
    problem = data.cases[1].questions[0].problem
    assert problem is not None and problem.startswith("question 2 (id 'bad'): ") and expected in problem


def test_missing_field_is_named():
    q = lme_question("bad")
    del q["haystack_dates"]
    data = parse_dataset([lme_question("ok"), q])
    assert data.cases[1].questions[0].problem == "question 2 (id 'bad'): haystack_dates: missing"


def test_truncated_file_is_refused_with_a_hint(tmp_path: Path):
    path = tmp_path / "cut.json"
    text = json.dumps([lme_question()])
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(DatasetError, match=r"cut\.json: not valid JSON: .* is it truncated"):
        load_dataset(path)


def test_mismatched_format_names_the_first_wrong_field(tmp_path: Path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([locomo_conversation()]), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"no usable question \(is it a longmemeval file\?\); the "
                                           r"first problem: question 1: question_id: missing"):
        load_dataset(path, "longmemeval")


def test_neither_format_and_missing_file(tmp_path: Path):
    with pytest.raises(DatasetError, match=r"neither LongMemEval .* nor LoCoMo .* keys a, b"):
        parse_dataset([{"a": 1, "b": 2}])
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "absent.json")


def test_locomo_bad_date_and_speaker():
    conv = locomo_conversation()
    conv["conversation"]["session_2_date_time"] = "yesterday"
    data = parse_dataset([conv, locomo_conversation()])
    problem = data.cases[0].questions[0].problem
    assert problem == ("conversation 1 (sample_id 'conv-1'): conversation.session_2_date_time: "
                       "'yesterday' is not a date like '1:56 pm on 8 May, 2023'")
    conv = locomo_conversation()
    conv["conversation"]["session_1"][0]["speaker"] = "Bob"
    data = parse_dataset([conv, locomo_conversation()])
    assert "conversation.session_1[0].speaker: 'Bob' is neither speaker_a nor speaker_b" in (
        data.cases[0].questions[0].problem or "")


def test_variant_and_outdated_fields_in_both_formats():
    conv = locomo_conversation()
    conv["qa"][1].update(variant="update", outdated=["D1:2", "D7:7"])
    data = parse_dataset([conv])
    q1, q2, _q3 = data.cases[0].questions
    assert q1.variant is None and q1.outdated_turns == []
    assert (q2.variant, q2.outdated_turns, q2.outdated_sessions) == ("update", ["D1:2"], ["session_1"])
    assert any("outdated[1]: D7:7 names no turn" in note for note in q2.notes)
    (lme,) = parse_dataset([lme_question(variant="update", outdated_session_ids=["s2"])]).questions
    assert (lme.variant, lme.outdated_sessions) == ("update", ["s2"])


@pytest.mark.parametrize(("fmt", "change", "expected"), [
    ("locomo", {"variant": 3}, "qa[1].variant: expected a string, got int"),
    ("lme", {"variant": ["x"]}, "variant: expected a string, got list"),
    ("lme", {"outdated_session_ids": ["s9"]}, "outdated_session_ids[0]: 's9' is not one of"),
])
def test_bad_variant_or_outdated_is_the_questions_problem(fmt, change, expected):
    if fmt == "locomo":
        conv = locomo_conversation()
        conv["qa"][1].update(change)
        questions = parse_dataset([conv]).questions
        assert questions[0].problem is None and expected in (questions[1].problem or "")
    else:
        good, bad = parse_dataset([lme_question(), lme_question("q2", **change)]).questions
        assert good.problem is None and expected in (bad.problem or "")
