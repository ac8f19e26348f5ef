"""Reading the two published long-term-memory benchmarks into one shape.

**LongMemEval** (Wu et al., ICLR 2025; github.com/xiaowu0162/LongMemEval): a JSON list of
questions, each with its own haystack. Fields: ``question_id``, ``question_type`` (one of
:data:`LONGMEMEVAL_TYPES`; an id ending in ``_abs`` marks an abstention question), ``question``,
``answer``, ``question_date``, ``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions``
(a list of sessions, each a list of ``{"role": "user"|"assistant", "content": ..., "has_answer"?:
bool}`` turns) and ``answer_session_ids`` (the evidence). Dates look like ``2023/05/20 (Sat)
02:21``. The ``_s``, ``_m`` and ``oracle`` files share this shape. Other keys are ignored, except
hermes-core's optional ``variant`` (a string refining the type, used by examples/eval/).

**LoCoMo** (Maharana et al., ACL 2024; github.com/snap-research/locomo): a JSON list of
conversations (``locomo10.json``), each with ``sample_id``, ``conversation`` (``speaker_a``,
``speaker_b``, ``session_<n>`` lists of ``{"speaker", "dia_id", "text"}`` turns with optional
``img_url``/``blip_caption``, and ``session_<n>_date_time`` such as ``1:56 pm on 8 May, 2023``) and
``qa`` (``question``, ``answer`` — ``adversarial_answer`` for category 5 —, ``evidence``: dialogue
ids like ``"D1:3"`` = session 1, turn 3, and ``category`` 1-5, see :data:`LOCOMO_CATEGORIES`).

In a LoCoMo session the first speaker's lines are the user turns and the other's the replies (either
person may open a session; every line keeps its speaker's name).

Both become :class:`Dataset` → :class:`Case` (one haystack: a LongMemEval question, a LoCoMo
conversation) → :class:`HaystackSession` and :class:`Question`. A file that is not JSON, or matches
neither format, raises :class:`DatasetError`. A *question* with a wrong field does not stop the
run: it carries ``problem`` (naming the first wrong field, e.g. ``question 3 (id 'abc'):
haystack_sessions[2][5].role: expected 'user' or 'assistant', got 'system'``) and is scored as a
failure; only when no question at all is usable is the file refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from hermes_core.errors import HermesCoreError
from hermes_core.history import read_text

__all__ = [
    "LOCOMO_CATEGORIES",
    "LONGMEMEVAL_TYPES",
    "Case",
    "Dataset",
    "DatasetError",
    "Format",
    "HaystackSession",
    "Question",
    "Turn",
    "load_dataset",
    "parse_dataset",
]

Format = Literal["longmemeval", "locomo"]

#: LongMemEval's question types (its paper, section 3; ``_abs`` ids are the abstention variants)
LONGMEMEVAL_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
#: LoCoMo's QA categories by number, named as the benchmark's users name them (mem0's evaluation)
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_LME_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})\s*$")
_LOCOMO_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %B %Y", "%I:%M %p on %B %d, %Y")
_LME_EXAMPLE = "2023/05/20 (Sat) 02:21"
_DIA_ID = re.compile(r"D(\d+):(\d+)")


class DatasetError(HermesCoreError):
    """The file cannot be used at all; the message names the file and the first wrong thing."""


@dataclass(slots=True)
class Turn:
    role: Literal["user", "assistant"]
    content: str
    has_answer: bool = False
    #: LoCoMo's dialogue id ("D1:3"); ``None`` in LongMemEval
    turn_id: str | None = None
    speaker: str | None = None


@dataclass(slots=True)
class HaystackSession:
    id: str
    date: datetime | None
    date_text: str
    turns: list[Turn]


@dataclass(slots=True)
class Question:
    id: str
    type: str
    question: str
    answer: str
    date: datetime | None = None
    date_text: str = ""
    #: evidence at session level (LongMemEval ``answer_session_ids``; LoCoMo: the sessions of the
    #: evidence turns)
    evidence_sessions: list[str] = field(default_factory=list)
    #: LoCoMo evidence dialogue ids ("D1:3"); empty for LongMemEval (its unit is the session)
    evidence_turns: list[str] = field(default_factory=list)
    abstention: bool = False
    category: int | None = None
    #: a finer label inside the type (hermes-core's own ``variant`` field, in LongMemEval files and
    #: LoCoMo ``qa`` entries, e.g. "paraphrase"); reports group by "type / variant" when it is set
    variant: str | None = None
    #: knowledge updates: where the superseded statement is (hermes-core's own fields: LongMemEval
    #: ``outdated_session_ids``, LoCoMo ``outdated`` dialogue ids), to check that the current
    #: statement ranks above it
    outdated_sessions: list[str] = field(default_factory=list)
    outdated_turns: list[str] = field(default_factory=list)
    #: why this question cannot be evaluated (it is then counted as a failure)
    problem: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Case:
    """One haystack and the questions asked over it."""

    id: str
    sessions: list[HaystackSession]
    questions: list[Question]
    problem: str | None = None

    def sessions_in_date_order(self) -> list[HaystackSession]:
        """Sessions sorted by date (undated ones keep their place at the start), stable."""
        floor = datetime.min.replace(tzinfo=UTC)
        return sorted(self.sessions, key=lambda s: s.date or floor)


@dataclass(slots=True)
class Dataset:
    path: str
    format: Format
    cases: list[Case]

    @property
    def questions(self) -> list[Question]:
        return [q for c in self.cases for q in c.questions]


class _Bad(Exception):
    """A wrong field inside one question or conversation (turned into its ``problem``)."""


def load_dataset(path: str | Path, fmt: Format | Literal["auto"] = "auto") -> Dataset:
    """Read ``path`` (LongMemEval or LoCoMo JSON); :class:`DatasetError` when it is unusable."""
    p = Path(path)
    raw = read_text(p, DatasetError, "give the path of a LongMemEval or LoCoMo .json file "
                    "(docs/eval.md says where to get them)")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        hint = (" — the file ends early: is it truncated (an interrupted download)?"
                if raw.rstrip()[-1:] not in ("]", "}") else "")
        raise DatasetError(f"{p}: not valid JSON: {exc.msg} at line {exc.lineno}, column "
                           f"{exc.colno}{hint}") from None
    return parse_dataset(data, fmt, name=str(p))


def detect_format(data: Any, name: str = "<data>") -> Format:
    items = data if isinstance(data, list) else [data]
    first = items[0] if items else None
    if isinstance(first, dict):
        if "question_id" in first or "haystack_sessions" in first:
            return "longmemeval"
        if "conversation" in first or "qa" in first:
            return "locomo"
    what = type(first).__name__ if items else "an empty list"
    keys = f" with keys {', '.join(sorted(first)[:6])}" if isinstance(first, dict) else ""
    raise DatasetError(f"{name}: neither LongMemEval (a list of objects with 'question_id', "
                       f"'haystack_sessions', ...) nor LoCoMo (a list of objects with "
                       f"'conversation' and 'qa'); the first item is {what}{keys}")


def parse_dataset(data: Any, fmt: Format | Literal["auto"] = "auto", *, name: str = "<data>") -> Dataset:
    """Build a :class:`Dataset` from already-parsed JSON."""
    chosen: Format = detect_format(data, name) if fmt == "auto" else fmt
    if chosen == "locomo" and isinstance(data, dict):
        data = [data]  # one conversation on its own
    if not isinstance(data, list):
        raise DatasetError(f"{name}: the top level must be a JSON list of "
                           f"{'questions' if chosen == 'longmemeval' else 'conversations'}, got "
                           f"{type(data).__name__}")
    if not data:
        raise DatasetError(f"{name}: the list is empty; nothing to evaluate")
    cases = _longmemeval(data) if chosen == "longmemeval" else _locomo(data)
    questions = [q for c in cases for q in c.questions]
    if questions and all(q.problem for q in questions):
        raise DatasetError(f"{name}: no usable question (is it a {chosen} file?); the first "
                           f"problem: {questions[0].problem}")
    if not questions:
        raise DatasetError(f"{name}: no questions found")
    return Dataset(name, chosen, cases)


# --------------------------------------------------------------------------------------------------
# LongMemEval
# --------------------------------------------------------------------------------------------------


def parse_longmemeval_date(text: str) -> datetime:
    m = _LME_DATE.match(text)
    if not m:
        raise ValueError(text)
    y, mo, d, h, mi = (int(x) for x in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def _str(value: Any, where: str, *, allow_number: bool = False) -> str:
    if isinstance(value, str):
        return value
    if allow_number and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise _Bad(f"{where}: expected a string, got {type(value).__name__}")


def _date(value: Any, where: str, parse: Callable[[str], datetime], example: str
          ) -> tuple[str, datetime]:
    """``(text, date)`` of the date string at ``where``, read by ``parse``."""
    text = _str(value, where)
    try:
        return text, parse(text)
    except ValueError:
        raise _Bad(f"{where}: {text!r} is not a date like {example!r}") from None


def _session_ids(item: dict[str, Any], key: str, seen: set[str]) -> list[str]:
    """The session ids listed under ``key`` (absent: none), each one of ``seen``."""
    ids = [_str(e, f"{key}[{k}]") for k, e in enumerate(_list(item.get(key, []), key))]
    for k, e in enumerate(ids):
        if e not in seen:
            raise _Bad(f"{key}[{k}]: {e!r} is not one of haystack_session_ids")
    return ids


def _variant(item: dict[str, Any], where: str) -> str | None:
    variant = item.get("variant")
    if variant is not None and not isinstance(variant, str):
        raise _Bad(f"{where}variant: expected a string, got {type(variant).__name__}")
    return variant


def _dia_ids(text: str, where: str, turn_session: dict[str, str], notes: list[str]) -> list[str]:
    """Every dialogue id in ``text`` that names a turn (a few published entries hold two ids in
    one string, "D8:6; D9:17"); an id naming no turn is noted and ignored."""
    out = []
    for m in _DIA_ID.finditer(text):
        dia = f"D{int(m.group(1))}:{int(m.group(2))}"
        if dia not in turn_session:
            notes.append(f"{where}: {dia} names no turn of the conversation; ignored")
        elif dia not in out:
            out.append(dia)
    return out


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _longmemeval(items: list[Any]) -> list[Case]:
    cases = []
    for index, item in enumerate(items, start=1):
        qid = item.get("question_id") if isinstance(item, dict) else None
        label = f"question {index}" + (f" (id {qid!r})" if isinstance(qid, str) else "")
        try:
            cases.append(_lme_case(item, index))
        except _Bad as exc:
            qid_text = qid if isinstance(qid, str) else f"#{index}"
            problem = f"{label}: {exc}"
            q = Question(id=qid_text, type=str(item.get("question_type", "?"))
                         if isinstance(item, dict) else "?", question="", answer="", problem=problem)
            cases.append(Case(qid_text, [], [q], problem=problem))
    return cases


def _lme_case(item: Any, index: int) -> Case:
    if not isinstance(item, dict):
        raise _Bad(f"expected an object, got {type(item).__name__}")
    for key in ("question_id", "question_type", "question", "answer", "question_date",
                "haystack_session_ids", "haystack_dates", "haystack_sessions", "answer_session_ids"):
        if key not in item:
            raise _Bad(f"{key}: missing")
    qid = _str(item["question_id"], "question_id")
    qtype = _str(item["question_type"], "question_type")
    question = _str(item["question"], "question")
    answer = _str(item["answer"], "answer", allow_number=True)
    qdate_text, qdate = _date(item["question_date"], "question_date", parse_longmemeval_date,
                              _LME_EXAMPLE)
    ids = _list(item["haystack_session_ids"], "haystack_session_ids")
    dates = _list(item["haystack_dates"], "haystack_dates")
    sessions_raw = _list(item["haystack_sessions"], "haystack_sessions")
    if not (len(ids) == len(dates) == len(sessions_raw)):
        raise _Bad(f"haystack_session_ids, haystack_dates and haystack_sessions must be parallel "
                   f"lists; their lengths are {len(ids)}, {len(dates)} and {len(sessions_raw)}")
    sessions: list[HaystackSession] = []
    seen: set[str] = set()
    for i, (sid, dtext, turns_raw) in enumerate(zip(ids, dates, sessions_raw, strict=True)):
        sid = _str(sid, f"haystack_session_ids[{i}]")
        if sid in seen:
            raise _Bad(f"haystack_session_ids[{i}]: {sid!r} appears twice")
        seen.add(sid)
        dtext, date = _date(dtext, f"haystack_dates[{i}]", parse_longmemeval_date, _LME_EXAMPLE)
        turns = []
        for j, t in enumerate(_list(turns_raw, f"haystack_sessions[{i}]")):
            where = f"haystack_sessions[{i}][{j}]"
            if not isinstance(t, dict):
                raise _Bad(f"{where}: expected a {{role, content}} object, got {type(t).__name__}")
            role = t.get("role")
            if role not in ("user", "assistant"):
                raise _Bad(f"{where}.role: expected 'user' or 'assistant', got {role!r}")
            content = _str(t.get("content"), f"{where}.content")
            has_answer = t.get("has_answer", False)
            if not isinstance(has_answer, bool):
                raise _Bad(f"{where}.has_answer: expected true or false, got {has_answer!r}")
            turns.append(Turn(role, content, has_answer))
        sessions.append(HaystackSession(sid, date, dtext, turns))
    evidence = _session_ids(item, "answer_session_ids", seen)
    variant = _variant(item, "")
    outdated = _session_ids(item, "outdated_session_ids", seen)
    q = Question(id=qid, type=qtype, question=question, answer=answer, date=qdate,
                 date_text=qdate_text, evidence_sessions=evidence, abstention=qid.endswith("_abs"),
                 variant=variant, outdated_sessions=outdated)
    if qtype not in LONGMEMEVAL_TYPES:
        q.problem = (f"question {index} (id {qid!r}): question_type: unknown type {qtype!r}; "
                     f"expected one of {', '.join(LONGMEMEVAL_TYPES)}")
    return Case(qid, sessions, [q])


# --------------------------------------------------------------------------------------------------
# LoCoMo
# --------------------------------------------------------------------------------------------------


def parse_locomo_date(text: str) -> datetime:
    cleaned = " ".join(text.split())
    for fmt in _LOCOMO_DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(text)


def _locomo(items: list[Any]) -> list[Case]:
    cases = []
    for index, item in enumerate(items, start=1):
        sid = item.get("sample_id") if isinstance(item, dict) else None
        cid = sid if isinstance(sid, str) else f"conversation-{index}"
        label = f"conversation {index}" + (f" (sample_id {sid!r})" if isinstance(sid, str) else "")
        try:
            cases.append(_locomo_case(item, cid, label))
        except _Bad as exc:
            problem = f"{label}: {exc}"
            q = Question(id=f"{cid}/?", type="?", question="", answer="", problem=problem)
            cases.append(Case(cid, [], [q], problem=problem))
    return cases


def _locomo_case(item: Any, cid: str, label: str) -> Case:
    if not isinstance(item, dict):
        raise _Bad(f"expected an object, got {type(item).__name__}")
    conv = item.get("conversation")
    if not isinstance(conv, dict):
        raise _Bad("conversation: missing or not an object")
    speakers = [conv.get("speaker_a"), conv.get("speaker_b")]
    for key, value in zip(("speaker_a", "speaker_b"), speakers, strict=True):
        _str(value, f"conversation.{key}")
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    if not numbers:
        raise _Bad("conversation: no session_<n> lists")
    turn_session: dict[str, str] = {}
    sessions = [_locomo_session(conv, f"session_{n}", speakers, turn_session) for n in numbers]
    last = max((s.date for s in sessions if s.date), default=None)
    questions = []
    for k, entry in enumerate(_list(item.get("qa"), "qa")):
        q = Question(id=f"{cid}/q{k + 1}", type="?", question="", answer="", date=last,
                     date_text=last.strftime("%Y-%m-%d %H:%M") if last else "")
        try:
            _locomo_question(entry, k, q, turn_session)
        except _Bad as exc:
            q.problem = f"{label}: {exc}"
        questions.append(q)
    return Case(cid, sessions, questions)


def _locomo_session(conv: dict[str, Any], key: str, speakers: list[Any],
                    turn_session: dict[str, str]) -> HaystackSession:
    """Session ``key`` of a LoCoMo conversation; its turns' ids are mapped to ``key`` in
    ``turn_session``."""
    dtext, date = _date(conv.get(f"{key}_date_time"), f"conversation.{key}_date_time",
                        parse_locomo_date, "1:56 pm on 8 May, 2023")
    turns = []
    opener: str | None = None  # the session's first speaker plays the user in it
    for j, t in enumerate(_list(conv[key], f"conversation.{key}")):
        speaker, dia, text = _locomo_turn(t, f"conversation.{key}[{j}]", speakers)
        opener = opener or speaker
        role: Literal["user", "assistant"] = "user" if speaker == opener else "assistant"
        turns.append(Turn(role, text, turn_id=dia, speaker=speaker))
        turn_session[dia] = key
    return HaystackSession(key, date, dtext, turns)


def _locomo_turn(t: Any, where: str, speakers: list[Any]) -> tuple[str, str, str]:
    """``(speaker, dia_id, text)`` of a LoCoMo turn; a shared photo's caption is added to the
    text."""
    if not isinstance(t, dict):
        raise _Bad(f"{where}: expected a {{speaker, dia_id, text}} object")
    speaker = _str(t.get("speaker"), f"{where}.speaker")
    if speaker not in speakers:
        raise _Bad(f"{where}.speaker: {speaker!r} is neither speaker_a nor speaker_b")
    dia = _str(t.get("dia_id"), f"{where}.dia_id")
    text = _str(t.get("text", ""), f"{where}.text")
    caption = t.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares a photo: {caption.strip()}]".strip()
    return speaker, dia, text


def _locomo_question(entry: Any, k: int, q: Question, turn_session: dict[str, str]) -> None:
    where = f"qa[{k}]"
    if not isinstance(entry, dict):
        raise _Bad(f"{where}: expected an object")
    category = entry.get("category")
    if category not in LOCOMO_CATEGORIES:
        raise _Bad(f"{where}.category: expected 1-5, got {category!r}")
    q.category = category
    q.type = LOCOMO_CATEGORIES[category]
    q.question = _str(entry.get("question"), f"{where}.question")
    key = "adversarial_answer" if category == 5 and "answer" not in entry else "answer"
    q.answer = _str(entry.get(key), f"{where}.{key}", allow_number=True)
    q.abstention = category == 5
    q.variant = _variant(entry, f"{where}.")
    for field_name, turns, sessions in (("evidence", q.evidence_turns, q.evidence_sessions),
                                        ("outdated", q.outdated_turns, q.outdated_sessions)):
        for e, raw in enumerate(_list(entry.get(field_name, []), f"{where}.{field_name}")):
            label = f"{where}.{field_name}[{e}]"
            for dia in _dia_ids(_str(raw, label), label, turn_session, q.notes):
                if dia not in turns:
                    turns.append(dia)
                    if turn_session[dia] not in sessions:
                        sessions.append(turn_session[dia])
