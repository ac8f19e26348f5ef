"""Writes examples/eval/paraphrase.json: a recall set for hybrid search, in LongMemEval's format.

One person's work and life over a year, 40 sessions, with distractor sessions that share the
vocabulary of the facts (two trips, two databases, two pets' vets, ...). Each question has every
session as its haystack and names its evidence in ``answer_session_ids``. ``variant`` (an
extension LongMemEval readers ignore) says what the question tests:

* ``exact-and``: the question repeats several words of the fact;
* ``exact-or``: some of its words are in the fact, others only elsewhere (no message has all);
* ``plain-own-words``: a plain-language question in the user's own words;
* ``paraphrase``: reworded, sharing no content word with the fact;
* ``preference``: about a preference the user only implied;
* ``knowledge-update``: the fact changed in a later session; the evidence is the later one, and
  ``outdated_session_ids`` (another extension) names the session the current one must outrank.

    python examples/eval/make_paraphrase_set.py          # rewrites paraphrase.json next to it
    python examples/eval/make_paraphrase_set.py --set b  # the held-out set: paraphrase-b.json
    python examples/eval/make_paraphrase_set.py --set c  # the second held-out set: paraphrase-c.json
    python examples/eval/make_paraphrase_set.py --set d  # the third held-out set: paraphrase-d.json
    python examples/eval/make_paraphrase_set.py --set e  # the fourth held-out set: paraphrase-e.json

The sets are written by hand, not generated from a seed: ``--set b`` is a second person's year
(paraphrase_b.py), written before the fusion was tuned on the first set and never tuned on, so
the two sets' figures show how much the tuning flatters the first. ``--set c`` is a third
person's year (paraphrase_c.py), written before the fusion was changed for set B. ``--set d`` is a
fourth person's year (paraphrase_d.py), written before the fusion was changed for issue 19's
updates and preferences, with more knowledge updates (most stated without a change word): it is
only reported, never tuned on. ``--set e`` is a fifth person's year (paraphrase_e.py), written blind
to the ranking, never tuned on: its author neither read how the archive ranks nor ran any search
on it.
"""

from __future__ import annotations

import json
from pathlib import Path

U, A = "user", "assistant"

SESSIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "dog-adopt": ("2024/01/06 (Sat) 10:12", [
        (U, "We finally adopted a dog! A three-year-old whippet called Pepper from the shelter in Leith."),
        (A, "Congratulations! Whippets are gentle and love a warm blanket. How is she settling in?"),
        (U, "She sleeps about twenty hours a day and steals the sofa the moment I stand up."),
    ]),
    "vet-cat": ("2024/01/20 (Sat) 15:40", [
        (U, "My sister's cat Mochi needs a vet near Morningside, any tips on what to ask?"),
        (A, "Ask about their out-of-hours cover and whether they stock the cat's usual food."),
    ]),
    "db-migrate": ("2024/02/02 (Fri) 17:05", [
        (U, "At work we're moving the billing service off MySQL onto PostgreSQL 16 next quarter."),
        (A, "Plan the cutover with logical replication so you can fall back if something breaks."),
        (U, "Right, Tomasz owns the cutover runbook, I'm only doing the schema review."),
    ]),
    "db-distractor": ("2024/02/09 (Fri) 12:30", [
        (U, "Random question: is SQLite fine for a hobby project with a few thousand rows?"),
        (A, "Yes, SQLite is a great fit for that size; back the file up and you are set."),
    ]),
    "allergy": ("2024/02/14 (Wed) 19:20", [
        (U, "Dinner plans tonight, but I have to be careful: I react badly to cashews and pistachios."),
        (A, "Tree-nut allergies are worth flagging to the restaurant when you book."),
    ]),
    "commute-bike": ("2024/02/26 (Mon) 08:10", [
        (U, "I've started cycling to the office along the canal path, about 25 minutes each way."),
        (A, "Nice! Lights and a waterproof layer will make the winter mornings easier."),
    ]),
    "team-lead": ("2024/03/04 (Mon) 09:45", [
        (U, "My manager is Priya Raman; she runs the payments platform group."),
        (A, "Good to know. Do you have regular one-to-ones with her?"),
        (U, "Every other Thursday at four."),
    ]),
    "trip-lisbon": ("2024/03/18 (Mon) 21:00", [
        (U, "Booked flights to Lisbon for the second week of May, just me and Ana."),
        (A, "Lisbon in May is lovely. Try the tram 28 early in the morning before the queues."),
    ]),
    "trip-distractor": ("2024/03/22 (Fri) 13:15", [
        (U, "A colleague asked for flight tips to Porto; what airline flies direct from Edinburgh?"),
        (A, "Several low-cost carriers fly direct in summer; check the seasonal schedules."),
    ]),
    "editor": ("2024/04/03 (Wed) 11:20", [
        (U, "I switched my editor from VS Code to Helix last month, the modal keys finally clicked."),
        (A, "Helix's selection-first model takes a week to get used to. Any plugins you miss?"),
    ]),
    "coffee": ("2024/04/12 (Fri) 08:05", [
        (U, "I gave up on espresso at home; these days it's an Aeropress with a light Ethiopian roast."),
        (A, "A light Ethiopian in an Aeropress is bright and fruity; try a 2 minute steep."),
    ]),
    "running": ("2024/04/20 (Sat) 07:30", [
        (U, "Signed up for the Edinburgh half marathon at the end of May, training three times a week."),
        (A, "Great goal. Build your long run gradually and keep one easy week per month."),
    ]),
    "flaky-ci": ("2024/05/02 (Thu) 16:50", [
        (U, "The integration tests kept timing out in CI, turned out the runner had 2 GB of memory."),
        (A, "Bumping the runner size or splitting the suite should stop the timeouts."),
        (U, "We moved them to the 8 GB runners and they pass in eleven minutes now."),
    ]),
    "ci-distractor": ("2024/05/06 (Mon) 10:00", [
        (U, "How do I cache pip downloads in a CI pipeline?"),
        (A, "Cache the pip cache directory keyed on the hash of your requirements files."),
    ]),
    "book": ("2024/05/20 (Mon) 22:10", [
        (U, "Reading 'The Dispossessed' by Le Guin on the flight back, could not put it down."),
        (A, "A classic. If you liked it, 'The Left Hand of Darkness' is a natural next read."),
    ]),
    "sister-baby": ("2024/06/01 (Sat) 18:00", [
        (U, "My sister Elena had her baby yesterday, a boy named Luca, 3.4 kilos."),
        (A, "Wonderful news, congratulations to the whole family!"),
    ]),
    "standing-desk": ("2024/06/10 (Mon) 14:00", [
        (U, "My lower back has been aching after long days at the laptop."),
        (A, "A standing desk, or raising the screen to eye level, often helps."),
        (U, "I ordered a sit-stand desk frame, arrives on Friday."),
    ]),
    "garden": ("2024/06/22 (Sat) 12:00", [
        (U, "The tomatoes on the balcony are finally turning red, the basil went to seed though."),
        (A, "Pinch basil flowers off early to keep the leaves coming."),
    ]),
    "oncall": ("2024/07/03 (Wed) 02:40", [
        (U, "Paged at 2am: the card authorisation queue backed up because a consumer deadlocked."),
        (A, "Restarting the consumer clears it short term; a lock timeout would prevent a repeat."),
        (U, "Added a lock timeout of 5 seconds and an alert on queue depth over 10k."),
    ]),
    "music": ("2024/07/15 (Mon) 20:30", [
        (U, "Can you suggest some albums? Lately I keep putting on Nils Frahm and Ólafur Arnalds while I work."),
        (A, "Try Hania Rani, Max Richter's 'Sleep' and Jóhann Jóhannsson."),
    ]),
    "languages": ("2024/07/28 (Sun) 17:45", [
        (U, "Practising Portuguese on the app every evening before bed, Ana's family speaks it at home."),
        (A, "Mixing in podcasts will help with European Portuguese pronunciation."),
    ]),
    "rent": ("2024/08/05 (Mon) 19:10", [
        (U, "Our landlord is raising the rent to 1,450 a month from October."),
        (A, "That's a big jump; check the notice period your lease requires."),
    ]),
    "car-distractor": ("2024/08/12 (Mon) 09:30", [
        (U, "Ana wants to lease an electric car; is the monthly cost usually worth it?"),
        (A, "It depends on mileage and the residual value; compare against buying used."),
    ]),
    "sleep": ("2024/08/20 (Tue) 23:50", [
        (U, "I keep waking at 4am and can't get back to sleep."),
        (A, "Keeping the room cool and avoiding screens for an hour before bed can help."),
        (U, "I'll try no phone in the bedroom for two weeks and see."),
    ]),
    "kubernetes": ("2024/09/02 (Mon) 15:20", [
        (U, "We're migrating the fraud scoring service to Kubernetes; my part is the Helm chart."),
        (A, "Start with resource requests and a readiness probe; they avoid most early surprises."),
    ]),
    "diet": ("2024/09/14 (Sat) 12:40", [
        (U, "Any ideas for a weeknight dinner? I stopped eating meat a couple of months ago, fish too."),
        (A, "A chickpea and spinach curry or a mushroom risotto are quick and filling."),
    ]),
    "gift": ("2024/09/25 (Wed) 18:20", [
        (U, "Ana's birthday is on the 9th of October, I want to get her something special."),
        (A, "What does she enjoy? An experience often beats an object."),
        (U, "She's been talking about a pottery class for ages, I'll book one."),
    ]),
    # ---- later sessions: facts that changed
    "dog-vet-new": ("2024/10/04 (Fri) 10:30", [
        (U, "Pepper's vet retired, so from now on she goes to the Bruntsfield animal clinic."),
        (A, "Ask them to transfer her records from the old practice."),
    ]),
    "dog-vet-old": ("2024/02/20 (Tue) 09:15", [
        (U, "Registered Pepper with Dr Alvarez's practice in Stockbridge for her vaccinations."),
        (A, "Good, keep her vaccination card somewhere handy."),
    ]),
    "commute-train": ("2024/10/14 (Mon) 08:20", [
        (U, "The canal path is flooded every other week, so I've gone back to taking the train to work."),
        (A, "The train is drier, at least! A book or podcast makes the ride go faster."),
    ]),
    "team-lead-new": ("2024/10/21 (Mon) 10:10", [
        (U, "Reorg news: Priya moved to the risk team and Daniel Osei is my manager now."),
        (A, "Changes like that take adjusting. Have you met with Daniel yet?"),
    ]),
    "rent-new": ("2024/11/02 (Sat) 11:00", [
        (U, "We negotiated with the landlord and settled on 1,380 a month instead."),
        (A, "Well done, that's a decent saving over the year."),
    ]),
    "editor-new": ("2024/11/18 (Mon) 16:30", [
        (U, "Gave up on Helix after all, the lack of plugins wore me down; back in Neovim for everything."),
        (A, "Neovim with a small config keeps most of the modal feel."),
    ]),
    "coffee-new": ("2024/12/01 (Sun) 09:00", [
        (U, "Santa came early: got a proper espresso machine, so the Aeropress is retired."),
        (A, "Dialing in the grind is the fun part; expect a few sour shots at first."),
    ]),
    # ---- more distractors sharing words
    "nuts-distractor": ("2024/12/06 (Fri) 13:00", [
        (U, "Is peanut butter healthy as a snack for a marathon runner?"),
        (A, "In moderation, yes: protein and fats, but watch the portion size."),
    ]),
    "queue-distractor": ("2024/12/10 (Tue) 11:30", [
        (U, "What's the difference between a message queue and a log like Kafka?"),
        (A, "A queue removes messages once consumed; a log keeps them for replay."),
    ]),
    "baby-distractor": ("2024/12/15 (Sun) 17:10", [
        (U, "A friend is expecting twins; what's a useful present for new parents?"),
        (A, "Meal deliveries or an offer of babysitting are always welcome."),
    ]),
    "sleep-distractor": ("2024/12/20 (Fri) 22:00", [
        (U, "Is melatonin safe for jet lag after long flights?"),
        (A, "Short-term use is generally considered safe; ask a pharmacist about dosing."),
    ]),
    "book-distractor": ("2024/12/28 (Sat) 15:00", [
        (U, "Recommend a non-fiction book about the history of computing?"),
        (A, "'The Dream Machine' by M. Mitchell Waldrop is excellent."),
    ]),
}

# (id, question_type, variant, question, answer, evidence, outdated)
QUESTIONS: list[tuple[str, str, str, str, str, list[str], list[str]]] = [
    # exact words, all in the fact
    ("and-dog", "single-session-user", "exact-and", "whippet Pepper shelter", "Pepper, a whippet", ["dog-adopt"], []),
    ("and-db", "single-session-user", "exact-and", "billing MySQL PostgreSQL", "PostgreSQL 16", ["db-migrate"], []),
    ("and-ci", "single-session-user", "exact-and", "integration tests timing out runner memory", "2 GB runner", ["flaky-ci"], []),
    ("and-oncall", "single-session-user", "exact-and", "authorisation queue consumer deadlocked", "lock timeout", ["oncall"], []),
    ("and-book", "single-session-user", "exact-and", "Dispossessed Le Guin", "The Dispossessed", ["book"], []),
    ("and-helm", "single-session-user", "exact-and", "fraud scoring Kubernetes Helm", "the Helm chart", ["kubernetes"], []),
    ("and-gift", "single-session-user", "exact-and", "pottery class birthday", "pottery class", ["gift"], []),
    ("and-luca", "single-session-user", "exact-and", "sister baby Luca", "Luca", ["sister-baby"], []),
    # exact words, some only elsewhere
    ("or-dog", "single-session-user", "exact-or", "whippet puppy adoption kennel", "Pepper", ["dog-adopt"], []),
    ("or-cutover", "single-session-user", "exact-or", "Tomasz runbook migration owner", "Tomasz", ["db-migrate"], []),
    ("or-runner", "single-session-user", "exact-or", "CI runner 8 GB upgrade duration", "eleven minutes", ["flaky-ci"], []),
    ("or-music", "single-session-user", "exact-or", "Frahm Arnalds playlist favourites", "Nils Frahm", ["music"], []),
    ("or-tomato", "single-session-user", "exact-or", "balcony tomatoes harvest vegetables", "tomatoes", ["garden"], []),
    ("or-alert", "single-session-user", "exact-or", "queue depth alert threshold pager", "10k", ["oncall"], []),
    ("or-desk", "single-session-user", "exact-or", "sit-stand desk delivery furniture", "Friday", ["standing-desk"], []),
    ("or-lisbon", "single-session-user", "exact-or", "Lisbon flights holiday dates", "May", ["trip-lisbon"], []),
    # plain-language, user's own words
    ("plain-allergy", "single-session-user", "plain-own-words", "What do I react badly to?", "cashews and pistachios", ["allergy"], []),
    ("plain-halfmarathon", "single-session-user", "plain-own-words", "Which half marathon did I sign up for?", "Edinburgh, end of May", ["running"], []),
    ("plain-portuguese", "single-session-user", "plain-own-words", "When am I practising Portuguese?", "every evening before bed", ["languages"], []),
    ("plain-4am", "single-session-user", "plain-own-words", "What did I try for waking at 4am?", "no phone in the bedroom", ["sleep"], []),
    ("plain-tram", "single-session-user", "plain-own-words", "Which tram should we take in Lisbon?", "tram 28", ["trip-lisbon"], []),
    ("plain-basil", "single-session-user", "plain-own-words", "What happened to my basil?", "went to seed", ["garden"], []),
    # paraphrase: no content word shared with the fact
    ("para-dog", "single-session-user", "paraphrase", "What kind of pet did we bring home, and what is she called?", "a whippet named Pepper", ["dog-adopt"], []),
    ("para-allergy", "single-session-user", "paraphrase", "Which foods give me an allergic reaction?", "cashews and pistachios", ["allergy"], []),
    ("para-back", "single-session-user", "paraphrase", "What furniture did I buy because of my spine pain?", "a sit-stand desk", ["standing-desk"], []),
    ("para-nephew", "single-session-user", "paraphrase", "What is my nephew's name?", "Luca", ["sister-baby"], []),
    ("para-novel", "single-session-user", "paraphrase", "Which science fiction novel was I hooked on during a plane journey?", "The Dispossessed", ["book"], []),
    ("para-outage", "single-session-user", "paraphrase", "How did I stop the payments backlog from happening again after the night page?", "a 5 second lock timeout", ["oncall"], []),
    ("para-rent", "single-session-user", "paraphrase", "How much more will our flat cost us from autumn?", "1,450 a month", ["rent"], []),
    ("para-insomnia", "single-session-user", "paraphrase", "What's my experiment for insomnia?", "no phone in the bedroom", ["sleep"], []),
    ("para-container", "single-session-user", "paraphrase", "Which piece of the container orchestration move am I responsible for?", "the Helm chart", ["kubernetes"], []),
    ("para-boss", "single-session-user", "paraphrase", "How often do I meet with the person I report to?", "every other Thursday", ["team-lead"], []),
    # preferences only implied
    ("pref-music", "single-session-preference", "preference", "Recommend me something to listen to while I focus.", "calm modern-classical piano (Frahm, Arnalds)", ["music"], []),
    ("pref-dinner", "single-session-preference", "preference", "Suggest a recipe I would enjoy for dinner.", "vegetarian, no fish", ["diet"], []),
    ("pref-snack", "single-session-preference", "preference", "Can you recommend a snack I could bring on a hike?", "no cashews or pistachios", ["allergy"], []),
    ("pref-readnext", "single-session-preference", "preference", "What should I read next?", "more Le Guin / thoughtful science fiction", ["book"], []),
    ("pref-holiday", "single-session-preference", "preference", "Where could Ana and I go for a long weekend?", "somewhere Portuguese-speaking", ["languages", "trip-lisbon"], []),
    # knowledge updates: the later session is the answer
    ("ku-vet", "knowledge-update", "knowledge-update", "Where does Pepper go to the vet?", "Bruntsfield animal clinic", ["dog-vet-new"], ["dog-vet-old"]),
    ("ku-commute", "knowledge-update", "knowledge-update", "How do I get to work these days?", "by train", ["commute-train"], ["commute-bike"]),
    ("ku-manager", "knowledge-update", "knowledge-update", "Who is my manager?", "Daniel Osei", ["team-lead-new"], ["team-lead"]),
    ("ku-rent", "knowledge-update", "knowledge-update", "What is our monthly rent going to be?", "1,380", ["rent-new"], ["rent"]),
    ("ku-editor", "knowledge-update", "knowledge-update", "Which editor do I use for coding?", "Neovim", ["editor-new"], ["editor"]),
    ("ku-coffee", "knowledge-update", "knowledge-update", "How do I make my coffee at home?", "an espresso machine", ["coffee-new"], ["coffee"]),
]


Sessions = dict[str, tuple[str, list[tuple[str, str]]]]
Questions = list[tuple[str, str, str, str, str, list[str], list[str]]]


def build(sessions_by_id: Sessions | None = None,
          questions: Questions | None = None) -> list[dict[str, object]]:
    by_id = SESSIONS if sessions_by_id is None else sessions_by_id
    order = sorted(by_id, key=lambda sid: by_id[sid][0])
    sessions = [[{"role": r, "content": c} for r, c in by_id[sid][1]] for sid in order]
    dates = [by_id[sid][0] for sid in order]
    out = []
    for qid, qtype, variant, question, answer, evidence, outdated in (
            QUESTIONS if questions is None else questions):
        for sid in evidence + outdated:
            assert sid in by_id, sid
        item: dict[str, object] = {
            "question_id": qid, "question_type": qtype, "variant": variant,
            "question": question, "answer": answer, "question_date": "2025/01/10 (Fri) 12:00",
            "haystack_session_ids": order, "haystack_dates": dates, "haystack_sessions": sessions,
            "answer_session_ids": evidence,
        }
        if outdated:
            item["outdated_session_ids"] = outdated
        out.append(item)
    return out


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--set", "b"]:
        sys.path.insert(0, str(Path(__file__).parent))
        import paraphrase_b

        path = Path(__file__).with_name("paraphrase-b.json")
        data = build(paraphrase_b.SESSIONS, paraphrase_b.QUESTIONS)
    elif sys.argv[1:] == ["--set", "c"]:
        sys.path.insert(0, str(Path(__file__).parent))
        import paraphrase_c

        path = Path(__file__).with_name("paraphrase-c.json")
        data = build(paraphrase_c.SESSIONS, paraphrase_c.QUESTIONS)
    elif sys.argv[1:] == ["--set", "d"]:
        sys.path.insert(0, str(Path(__file__).parent))
        import paraphrase_d

        path = Path(__file__).with_name("paraphrase-d.json")
        data = build(paraphrase_d.SESSIONS, paraphrase_d.QUESTIONS)
    elif sys.argv[1:] == ["--set", "e"]:
        sys.path.insert(0, str(Path(__file__).parent))
        import paraphrase_e

        path = Path(__file__).with_name("paraphrase-e.json")
        data = build(paraphrase_e.SESSIONS, paraphrase_e.QUESTIONS)
    else:
        path = Path(__file__).with_name("paraphrase.json")
        data = build()
    path.write_text(json.dumps(data, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(data)} questions over {len(data[0]['haystack_session_ids'])} "
          "sessions)")
