"""Write examples/eval/hermes-mini.json: a small LongMemEval-shaped dataset of our own.

Run from the repository root (the output is committed; rerunning rewrites it byte for byte):

    python examples/eval/make_dataset.py

What it holds: a pool of dated sessions — short sessions written here, plus the sessions of the
project's own transcripts (examples/first-week.jsonl, returning-user.jsonl, and the first
6 turns of long-incident.jsonl) —
and questions over them. Every question gets its own haystack: its evidence sessions plus a fixed,
seeded sample of distractors, always including the distractors that share its vocabulary (the
editor question's haystack holds another conversation about editors and Rust, ...).

Question variants (the optional ``variant`` field; ``question_type`` stays a LongMemEval type):

* ``exact-words`` — the question reuses the evidence's distinctive words (keyword search finds it);
* ``paraphrase`` — the same fact asked with none of the evidence's content words (needs meaning);
* ``indirect-preference`` — a request whose good answer depends on a preference stated in passing
  (``single-session-preference``; the answer is a rubric, as in LongMemEval);

* ``temporal`` — a question whose only clue is when something was said (``temporal-reasoning``);
  the sessions carry their dates, so a provider that keeps them can use it.

``knowledge-update`` questions (a fact stated, then changed in a later session) come in both the
exact-words and the paraphrase variant; their evidence is the later session, and the earlier one
stays in the haystack as a same-vocabulary distractor.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "hermes-mini.json"
SEED = 18
DISTRACTORS = 6
#: turns (user + reply) kept of each transcript session (long-incident.jsonl has 87 of log windows)
TRANSCRIPT_TURNS = 6

Turn = dict[str, Any]


def u(text: str, answer: bool = False) -> Turn:
    return {"role": "user", "content": text, **({"has_answer": True} if answer else {})}


def a(text: str) -> Turn:
    return {"role": "assistant", "content": text}


# session id -> (date, turns). Dates are spread over 2023 so knowledge updates have an order.
SESSIONS: dict[str, tuple[str, list[Turn]]] = {
    "editor": ("2023-04-03 09:12", [
        u("I finally moved all my Rust work to the Helix editor; the built-in language server "
          "support won me over.", True),
        a("Helix is a good fit for Rust: rust-analyzer works out of the box. Want a config?"),
        u("Maybe later. For now I just need the keybinding to jump to a definition."),
        a("In normal mode press g then d."),
    ]),
    "editor-distractor": ("2023-05-11 18:40", [
        u("My colleague keeps arguing that VS Code is the best editor for Rust beginners. Is he "
          "right?"),
        a("For beginners it is a fine choice: the rust-analyzer extension gives inline types and "
          "quick fixes. Any editor with a language server works, though."),
    ]),
    "dog": ("2023-02-18 11:05", [
        u("Big news at home: we adopted a greyhound named Biscuit from the rescue centre last "
          "weekend.", True),
        a("Congratulations! Retired racers are usually calm indoors. How is Biscuit settling in?"),
        u("She sleeps twenty hours a day and steals socks."),
        a("Classic greyhound. Keep the socks out of reach; swallowed fabric is a vet visit."),
    ]),
    "dog-distractor": ("2023-06-02 08:30", [
        u("My neighbour's greyhound keeps escaping his garden. What fence height stops a sighthound?"),
        a("At least 1.8 m, without horizontal rails to climb; sighthounds jump when they see prey."),
    ]),
    "cat": ("2023-03-09 20:15", [
        u("We also took in a grey cat called Miso, so the house is getting busy.", True),
        a("A cat and a dog: introduce them slowly, with a gate between rooms for the first week."),
    ]),
    "allergy": ("2023-01-22 12:00", [
        u("Before we plan any recipes: I'm allergic to peanuts, so please never suggest satay or "
          "anything with peanut sauce.", True),
        a("Understood, no peanuts in anything I suggest."),
    ]),
    "allergy-distractor": ("2023-07-19 13:45", [
        u("How do restaurants in the EU have to label allergens on their menus?"),
        a("Fourteen allergens must be declared, peanuts and tree nuts among them, in writing or on "
          "request with a sign saying where to ask."),
    ]),
    "commute-old": ("2023-03-01 07:50", [
        u("I cycle to the office every day, about 12 km each way, rain or shine.", True),
        a("That is a solid daily ride. Mudguards and a good rain jacket make winter bearable."),
    ]),
    "commute-new": ("2023-08-14 07:55", [
        u("Since we moved to Utrecht I take the train to work now; cycling to the office is too far "
          "from here.", True),
        a("The train gives you time to read. A folding bike helps for the last kilometres."),
    ]),
    "ci-old": ("2023-02-07 15:20", [
        u("Our team uses Jenkins for CI and the build queue is always full on Fridays.", True),
        a("Add agents for Fridays or split the slow integration stage into a nightly job."),
    ]),
    "ci-new": ("2023-09-04 10:10", [
        u("Update: we finished migrating our CI from Jenkins to GitHub Actions last week.", True),
        a("Nice. Cache your dependencies with actions/cache to keep the runs fast."),
    ]),
    "coffee": ("2023-05-27 09:00", [
        u("I tried the office coffee again. I can't stand the bitterness of dark roasts; the light "
          "Ethiopian beans with a fruity note are the only ones I ever finish.", True),
        a("Light roasts keep the fruit and acidity. A pour-over brings that out best."),
    ]),
    "holiday": ("2023-04-20 21:30", [
        u("Looking at old photos tonight. Crowded beaches drain me; the best holiday I ever had was "
          "a quiet hiking week in the Dolomites.", True),
        a("Hut-to-hut hiking there is wonderful in September, after the school holidays."),
    ]),
    "reading": ("2023-06-25 22:10", [
        u("I always fall asleep reading hard science fiction, but I tore through three Agatha "
          "Christie novels last month.", True),
        a("A good puzzle keeps you turning pages. Dorothy L. Sayers is a natural next step."),
    ]),
    "database": ("2023-03-15 14:00", [
        u("For context on the outage: our production database is PostgreSQL 15 on RDS, with "
          "pgbouncer in front in transaction mode.", True),
        a("Transaction pooling breaks session-level features like prepared statements; keep that "
          "in mind while debugging."),
    ]),
    "database-distractor": ("2023-08-30 16:25", [
        u("Should we upgrade our staging MySQL from 5.7 to 8.0 before or after the summer?"),
        a("Before: 5.7 is out of support. Test the new default authentication plugin first."),
    ]),
    "wedding": ("2023-05-05 19:45", [
        u("My sister Ana is getting married in Porto on 14 September, and I have to give a speech.",
          True),
        a("Congratulations to Ana! Keep the speech under five minutes and end with a toast."),
    ]),
    "laptop": ("2023-07-08 10:35", [
        u("I bought a ThinkPad X1 Carbon for work because the keyboard is excellent.", True),
        a("Good pick for typing all day. Check the BIOS for the battery charge threshold."),
    ]),
    "laptop-distractor": ("2023-09-12 17:05", [
        u("My brother wants a gaming laptop under 1500 euros. Any advice?"),
        a("Look for an RTX 4060 and a 165 Hz screen; thin gaming laptops throttle, so read reviews."),
    ]),
    "japanese": ("2023-01-30 18:20", [
        u("I'm learning Japanese with a tutor on Tuesdays and Thursdays after work.", True),
        a("Twice a week is a good rhythm. Daily kana practice between lessons speeds things up."),
    ]),
}

#: (id, variant, LongMemEval type, question, answer, evidence sessions, distractors that must be in)
QUESTIONS: list[tuple[str, str, str, str, str, list[str], list[str]]] = [
    ("editor-exact", "exact-words", "single-session-user", "Which editor did I move my Rust work to?",
     "Helix", ["editor"], ["editor-distractor"]),
    ("editor-para", "paraphrase", "single-session-user",
     "What program do I write my systems code in these days?", "Helix", ["editor"],
     ["editor-distractor"]),
    ("dog-exact", "exact-words", "single-session-user", "What is the name of the greyhound we adopted?",
     "Biscuit", ["dog"], ["dog-distractor"]),
    ("dog-para", "paraphrase", "single-session-user",
     "What did we call the retired racing hound that joined our family?", "Biscuit", ["dog"],
     ["dog-distractor"]),
    ("pets-multi", "exact-words", "multi-session", "How many pets did we take in, and what are their names?",
     "Two: Biscuit the greyhound and Miso the cat", ["dog", "cat"], ["dog-distractor"]),
    ("allergy-exact", "exact-words", "single-session-user", "What am I allergic to?", "Peanuts",
     ["allergy"], ["allergy-distractor"]),
    ("allergy-para", "paraphrase", "single-session-user",
     "Which legume must be kept out of any dish you propose for me?", "Peanuts", ["allergy"],
     ["allergy-distractor"]),
    ("commute-update", "exact-words", "knowledge-update", "How do I get to the office these days?",
     "By train (since moving to Utrecht; previously cycling)", ["commute-new"], ["commute-old"]),
    ("commute-update-para", "paraphrase", "knowledge-update",
     "What is my current way of reaching my workplace each morning?", "By train", ["commute-new"],
     ["commute-old"]),
    ("ci-update", "exact-words", "knowledge-update", "Which CI system does my team use now?",
     "GitHub Actions (migrated from Jenkins)", ["ci-new"], ["ci-old"]),
    ("ci-update-para", "paraphrase", "knowledge-update",
     "What runs our automated builds at the moment?", "GitHub Actions", ["ci-new"], ["ci-old"]),
    ("coffee-pref", "indirect-preference", "single-session-preference",
     "Can you recommend some beans I could buy for the weekend?",
     "The user would prefer light-roast, fruity beans such as Ethiopian ones, not dark roasts.",
     ["coffee"], []),
    ("holiday-pref", "indirect-preference", "single-session-preference",
     "Any ideas for where I should go on holiday this summer?",
     "The user would prefer a quiet mountain hiking trip (like the Dolomites), not a crowded beach.",
     ["holiday"], []),
    ("reading-pref", "indirect-preference", "single-session-preference",
     "Suggest something to read on my flight tomorrow.",
     "The user would prefer a classic mystery or detective novel (they enjoy Agatha Christie), not "
     "hard science fiction.", ["reading"], []),
    ("database-exact", "exact-words", "single-session-user",
     "Which PostgreSQL version is our production database on?", "PostgreSQL 15 on RDS", ["database"],
     ["database-distractor"]),
    ("database-para", "paraphrase", "single-session-user",
     "What release of the relational store backs our live system?", "PostgreSQL 15",
     ["database"], ["database-distractor"]),
    ("wedding-exact", "exact-words", "single-session-user", "Where is my sister Ana getting married?",
     "Porto", ["wedding"], []),
    ("wedding-para", "paraphrase", "single-session-user",
     "In which city will my sibling's ceremony take place?", "Porto", ["wedding"], []),
    ("laptop-exact", "exact-words", "single-session-user", "Which laptop did I buy for work?",
     "A ThinkPad X1 Carbon", ["laptop"], ["laptop-distractor"]),
    ("laptop-para", "paraphrase", "single-session-user",
     "What portable computer did I pick up for my job?", "A ThinkPad X1 Carbon", ["laptop"],
     ["laptop-distractor"]),
    ("japanese-exact", "exact-words", "single-session-user",
     "On which days do I have my Japanese tutor?", "Tuesdays and Thursdays", ["japanese"], []),
    ("japanese-para", "paraphrase", "single-session-user",
     "When are my weekly lessons for that East Asian language?", "Tuesdays and Thursdays",
     ["japanese"], []),
    # the date is the only clue: needs a provider that keeps the sessions' dates
    ("pet-temporal", "temporal", "temporal-reasoning", "Which animal did we bring home in February?",
     "A greyhound (Biscuit)", ["dog"], ["dog-distractor", "cat"]),
    ("lessons-temporal", "temporal", "temporal-reasoning",
     "What did I start learning at the end of January?", "Japanese, with a tutor", ["japanese"], []),
    # over the project's own transcripts (examples/*.jsonl)
    ("etl-exact", "exact-words", "single-session-user", "At what time does our nightly ETL keep timing out?",
     "Around 02:40", ["first-week-1"], ["long-incident-1"]),
    ("etl-para", "paraphrase", "single-session-user",
     "When in the night does the shipment data load usually fail?", "Around 02:40",
     ["first-week-1"], ["long-incident-1"]),
    ("airflow-exact", "exact-words", "single-session-user", "Which Airflow version runs our ETL?",
     "Airflow 2.8", ["first-week-1"], ["long-incident-1"]),
    ("queue-exact", "exact-words", "single-session-user",
     "Which queue did we choose between the payments API and the ledger?", "SQS FIFO",
     ["returning-user-1"], []),
    ("queue-para", "paraphrase", "single-session-user",
     "What messaging service did we settle on to connect money transfers with bookkeeping?",
     "Amazon SQS FIFO", ["returning-user-1"], []),
    ("kafka-assistant", "exact-words", "single-session-assistant",
     "Why did you say Kafka was not a good fit for our payments queue?",
     "Overkill for ~300 msg/s and a four-engineer team (more operations than needed)",
     ["returning-user-1"], []),
    ("short-answers-pref", "indirect-preference", "single-session-preference",
     "Explain how Postgres vacuum works.",
     "The user would prefer a short answer they can read on a phone between meetings.",
     ["first-week-1"], []),
    ("incident-exact", "exact-words", "single-session-user",
     "Which service had the incident with bursts of 502s after the depot rollout?", "parcel-router",
     ["long-incident-1"], ["first-week-1"]),
]

TRANSCRIPTS = {"first-week": "2023-04-12 08:30", "returning-user": "2023-06-14 13:00",
               "long-incident": "2023-07-03 02:55"}
#: the evidence turn of a question over a transcript: a substring of the turn marked has_answer
#: (in that question's haystack only)
MARKS = {"etl-exact": "keeps timing out around 02:40", "etl-para": "keeps timing out around 02:40",
         "airflow-exact": "Airflow 2.8", "short-answers-pref": "keep answers short",
         "queue-exact": "Let's go with SQS FIFO", "queue-para": "Let's go with SQS FIFO",
         "kafka-assistant": "Kafka is overkill", "incident-exact": "We have an incident on parcel-router"}


def transcript_sessions() -> dict[str, tuple[str, list[Turn]]]:
    sys.path.insert(0, str(ROOT))
    from hermes_core.replay import load_transcript

    out: dict[str, tuple[str, list[Turn]]] = {}
    for name, start in TRANSCRIPTS.items():
        t = load_transcript(ROOT / "examples" / f"{name}.jsonl")
        number, when = 1, datetime.strptime(start, "%Y-%m-%d %H:%M")
        turns: list[Turn] = []
        for turn in t.turns:
            if len(turns) >= 2 * TRANSCRIPT_TURNS and not turn.new_session:
                continue
            if turn.new_session and turns:
                out[f"{name}-{number}"] = (when.strftime("%Y-%m-%d %H:%M"), turns)
                number, when, turns = number + 1, when + timedelta(days=1), []
            turns.append(u(turn.user))
            turns.append(a(turn.responses[-1].text))
        out[f"{name}-{number}"] = (when.strftime("%Y-%m-%d %H:%M"), turns)
    return out


def marked(turns: list[Turn], mark: str | None) -> list[Turn]:
    """The evidence session's turns; with ``mark``, only the turn holding it has ``has_answer``."""
    if mark is None:
        return turns
    out = [{k: v for k, v in t.items() if k != "has_answer"} for t in turns]
    for t in out:
        if mark in t["content"]:
            t["has_answer"] = True
    return out


def lme_date(text: str) -> str:
    d = datetime.strptime(text, "%Y-%m-%d %H:%M")
    return d.strftime("%Y/%m/%d (%a) %H:%M")


def build() -> list[dict[str, Any]]:
    pool = {**SESSIONS, **transcript_sessions()}
    rng = random.Random(SEED)
    out = []
    for qid, variant, qtype, question, answer, evidence, must in QUESTIONS:
        others = sorted(s for s in pool if s not in evidence and s not in must)
        chosen = [*evidence, *must, *rng.sample(others, DISTRACTORS)]
        chosen.sort(key=lambda s: pool[s][0])
        out.append({
            "question_id": qid, "question_type": qtype, "variant": variant,
            "question": question, "answer": answer,
            "question_date": lme_date("2023-10-02 09:00"),
            "haystack_session_ids": chosen,
            "haystack_dates": [lme_date(pool[s][0]) for s in chosen],
            "haystack_sessions": [marked(pool[s][1], MARKS.get(qid)) if s in evidence else
                                  [{k: v for k, v in t.items() if k != "has_answer"} for t in pool[s][1]]
                                  for s in chosen],
            "answer_session_ids": list(evidence),
        })
    return out


def main() -> None:
    data = build()
    # one question per line: small, and a change shows up as a changed line
    lines = ",\n".join(json.dumps(q, ensure_ascii=False) for q in data)
    OUT.write_text(f"[\n{lines}\n]\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(data)} questions")


if __name__ == "__main__":
    main()
