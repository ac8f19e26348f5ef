"""Answering from recalled context and judging the answer (``hermes-core eval --answer``).

The answer prompt is this project's own and fixed (:data:`ANSWER_SYSTEM`, :data:`ANSWER_PROMPT`),
so runs over different providers differ only in what was recalled. The judge prompts are the
benchmarks' published evaluation protocols, quoted exactly:

* LongMemEval: the per-type templates of ``src/evaluation/evaluate_qa.py`` (``get_anscheck_prompt``)
  in github.com/xiaowu0162/LongMemEval (Wu et al., 2025); the verdict is "yes" in the reply.
* LoCoMo: LoCoMo's own repository scores answers by token F1, not with a model; the LLM judge used
  by the published LoCoMo figures of memory systems is mem0's ``ACCURACY_PROMPT``
  (``evaluation/metrics/llm_judge.py`` in github.com/mem0ai/mem0); the verdict is its JSON "label".
  As there, category 5 (adversarial) is not judged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hermes_core.types import Message

if TYPE_CHECKING:
    from hermes_core.llm import LLM

    from .datasets import Format, Question

__all__ = ["ANSWER_PROMPT", "ANSWER_SYSTEM", "Verdict", "answer_question", "judge_answer", "judge_prompt"]

#: hermes-core's fixed answering prompt (system part)
ANSWER_SYSTEM = (
    "You answer questions about a user's past conversations with an assistant. Use only the "
    "memory excerpts you are given; they were recalled from those conversations and may include "
    "irrelevant or outdated material. When facts conflict, prefer the most recent one. Answer in "
    "one or two sentences."
)
#: hermes-core's fixed answering prompt (user part); ``{context}``, ``{date}``, ``{question}``
ANSWER_PROMPT = (
    "Memory excerpts:\n<memory>\n{context}\n</memory>\n\n"
    "Today is {date}.\n"
    "Question: {question}\n\n"
    "If the excerpts do not contain what the question asks, say that you do not know."
)

# --------------------------------------------------------------------------------------------------
# LongMemEval's judge templates, quoted exactly from get_anscheck_prompt in
# xiaowu0162/LongMemEval, src/evaluation/evaluate_qa.py (a published evaluation protocol).
# Each is formatted positionally with (question, answer, response).
# --------------------------------------------------------------------------------------------------
_LME_DEFAULT = (
    "I will give you a question, a correct answer, and a response from a model. Please answer yes "
    "if the response contains the correct answer. Otherwise, answer no. If the response is "
    "equivalent to the correct answer or contains all the intermediate steps to get the correct "
    "answer, you should also answer yes. If the response only contains a subset of the information "
    "required by the answer, answer no. \n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: "
    "{}\n\nIs the model response correct? Answer yes or no only."
)
_LME_TEMPORAL = (
    "I will give you a question, a correct answer, and a response from a model. Please answer yes "
    "if the response contains the correct answer. Otherwise, answer no. If the response is "
    "equivalent to the correct answer or contains all the intermediate steps to get the correct "
    "answer, you should also answer yes. If the response only contains a subset of the information "
    "required by the answer, answer no. In addition, do not penalize off-by-one errors for the "
    "number of days. If the question asks for the number of days/weeks/months, etc., and the model "
    "makes off-by-one errors (e.g., predicting 19 days when the answer is 18), the model's response "
    "is still correct. \n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\nIs the model "
    "response correct? Answer yes or no only."
)
_LME_UPDATE = (
    "I will give you a question, a correct answer, and a response from a model. Please answer yes "
    "if the response contains the correct answer. Otherwise, answer no. If the response contains "
    "some previous information along with an updated answer, the response should be considered as "
    "correct as long as the updated answer is the required answer.\n\nQuestion: {}\n\nCorrect "
    "Answer: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."
)
_LME_PREFERENCE = (
    "I will give you a question, a rubric for desired personalized response, and a response from a "
    "model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. "
    "The model does not need to reflect all the points in the rubric. The response is correct as "
    "long as it recalls and utilizes the user's personal information correctly.\n\nQuestion: {}\n\n"
    "Rubric: {}\n\nModel Response: {}\n\nIs the model response correct? Answer yes or no only."
)
_LME_ABSTENTION = (
    "I will give you an unanswerable question, an explanation, and a response from a model. Please "
    "answer yes if the model correctly identifies the question as unanswerable. The model could say "
    "that the information is incomplete, or some other information is given but the asked "
    "information is not.\n\nQuestion: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model "
    "correctly identify the question as unanswerable? Answer yes or no only."
)
LONGMEMEVAL_JUDGE = {
    "single-session-user": _LME_DEFAULT,
    "single-session-assistant": _LME_DEFAULT,
    "multi-session": _LME_DEFAULT,
    "temporal-reasoning": _LME_TEMPORAL,
    "knowledge-update": _LME_UPDATE,
    "single-session-preference": _LME_PREFERENCE,
}

# --------------------------------------------------------------------------------------------------
# The LoCoMo judge used for published LoCoMo accuracy figures: ACCURACY_PROMPT, quoted exactly from
# mem0ai/mem0, evaluation/metrics/llm_judge.py (a published evaluation protocol).
# --------------------------------------------------------------------------------------------------
LOCOMO_JUDGE = (
    "\nYour task is to label an answer to a question as \u2019CORRECT\u2019 or \u2019WRONG\u2019. You "
    "will be "
    "given the following data:\n    (1) a question (posed by one user to another user), \n    (2) a "
    "\u2019gold\u2019 (ground truth) answer, \n    (3) a generated answer\nwhich you will score as "
    "CORRECT/WRONG.\n\nThe point of the question is to ask about something one user should know "
    "about the other user based on their prior conversations.\nThe gold answer will usually be a "
    "concise and short answer that includes the referenced topic, for example:\nQuestion: Do you "
    "remember what I got the last time I went to Hawaii?\nGold answer: A shell necklace\nThe "
    "generated answer might be much longer, but you should be generous with your grading - as long "
    "as it touches on the same topic as the gold answer, it should be counted as CORRECT. \n\nFor "
    "time related questions, the gold answer will be a specific date, month, year, etc. The "
    "generated answer might be much longer or use relative time references (like \"last Tuesday\" "
    "or \"next month\"), but you should be generous with your grading - as long as it refers to the "
    "same date or time period as the gold answer, it should be counted as CORRECT. Even if the "
    "format differs (e.g., \"May 7th\" vs \"7 May\"), consider it CORRECT if it's the same date.\n\n"
    "Now it's time for the real question:\nQuestion: {question}\nGold answer: {gold_answer}\n"
    "Generated answer: {generated_answer}\n\nFirst, provide a short (one sentence) explanation of "
    "your reasoning, then finish with CORRECT or WRONG. \nDo NOT include both CORRECT and WRONG in "
    "your response, or it will break the evaluation script.\n\nJust return the label CORRECT or "
    "WRONG in a json format with the key as \"label\".\n"
)


@dataclass
class Verdict:
    correct: bool | None  #: ``None``: not judged (LoCoMo category 5)
    prompt: str | None
    reply: str | None


def judge_prompt(fmt: Format, q: Question, response: str) -> str | None:
    """The benchmark's judge prompt for ``q`` and ``response``; ``None`` when it is not judged."""
    if fmt == "longmemeval":
        if q.abstention:
            return _LME_ABSTENTION.format(q.question, q.answer, response)
        template = LONGMEMEVAL_JUDGE.get(q.type)
        return template.format(q.question, q.answer, response) if template else None
    if q.category == 5:
        return None
    return LOCOMO_JUDGE.format(question=q.question, gold_answer=q.answer, generated_answer=response)


def _locomo_label(reply: str) -> bool:
    match = re.search(r"\{[^{}]*\}", reply)
    if match:
        try:
            label = json.loads(match.group(0)).get("label")
            if isinstance(label, str):
                return label.strip().upper() == "CORRECT"
        except ValueError:
            pass
    return "CORRECT" in reply.upper() and "WRONG" not in reply.upper()


def answer_question(llm: LLM, q: Question, context: str, *, max_tokens: int = 300) -> str:
    prompt = ANSWER_PROMPT.format(context=context or "(nothing was recalled)",
                                  date=q.date_text or "unknown", question=q.question)
    return llm.complete(system=ANSWER_SYSTEM, messages=[Message("user", prompt)],
                        max_tokens=max_tokens).strip()


def judge_answer(llm: LLM, fmt: Format, q: Question, response: str) -> Verdict:
    prompt = judge_prompt(fmt, q, response)
    if prompt is None:
        return Verdict(None, None, None)
    reply = llm.complete(system="", messages=[Message("user", prompt)],
                         max_tokens=10 if fmt == "longmemeval" else 200).strip()
    correct = "yes" in reply.lower() if fmt == "longmemeval" else _locomo_label(reply)
    return Verdict(correct, prompt, reply)
