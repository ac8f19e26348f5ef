"""The held-out paraphrase set (``paraphrase-b.json``): another person, written before any tuning.

A secondary-school physics teacher in Manchester over a year: family, a cycling club, a house
renovation, school life, health. Same variants and shape as the first set (see
make_paraphrase_set.py); the fusion weights in hybrid.py were never tuned on it.
"""

from __future__ import annotations

U, A = "user", "assistant"

SESSIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "school-start": ("2024/01/08 (Mon) 07:40", [
        (U, "New term today. I'm teaching two Year 11 physics groups and a Year 8 science class this year."),
        (A, "A full timetable! Year 11 will have their GCSEs in the summer, so that's a busy one."),
    ]),
    "mum-knee": ("2024/01/15 (Mon) 19:30", [
        (U, "Mum is having her left knee replaced at Wythenshawe hospital on the 2nd of February."),
        (A, "I hope it goes smoothly. Recovery usually takes about six weeks of physio."),
        (U, "My brother Tom will stay with her for the first fortnight."),
    ]),
    "club-join": ("2024/01/21 (Sun) 12:10", [
        (U, "Joined the Didsbury Wheelers cycling club; Sunday rides leave from the park gates at 8."),
        (A, "Club rides are a great way to build endurance. Do they have different pace groups?"),
        (U, "Yes, I'm in the B group, around 25 km/h average."),
    ]),
    "bike-distractor": ("2024/01/28 (Sun) 16:00", [
        (U, "What tyre pressure should a road bike run in wet weather?"),
        (A, "A little lower than usual, maybe 10 percent, for more grip."),
    ]),
    "boiler": ("2024/02/05 (Mon) 21:15", [
        (U, "The boiler packed in again, no hot water all weekend. The engineer says the heat exchanger is cracked."),
        (A, "A cracked heat exchanger usually means replacing the boiler rather than repairing it."),
        (U, "Yes, we're getting a quote for a heat pump instead."),
    ]),
    "lactose": ("2024/02/12 (Mon) 13:00", [
        (U, "Turns out I'm lactose intolerant, which explains a lot about the stomach cramps after lunch."),
        (A, "Lactose-free milk and hard cheeses are usually fine; soft cheeses and cream less so."),
    ]),
    "twins": ("2024/02/24 (Sat) 10:05", [
        (U, "Our twins Maya and Isaac turn seven in March and both want a party at the climbing wall."),
        (A, "Climbing wall parties are popular at that age; book early, weekends fill up fast."),
    ]),
    "podcast": ("2024/03/03 (Sun) 20:45", [
        (U, "I've been bingeing history podcasts on my commute, mostly The Rest Is History and Fall of Civilizations."),
        (A, "If you like those, Hardcore History goes even deeper, though episodes run for hours."),
    ]),
    "exam-board": ("2024/03/11 (Mon) 16:20", [
        (U, "The department is switching exam boards from AQA to OCR for the next Year 10 cohort."),
        (A, "That's a lot of resource rewriting. Is the practical endorsement handled differently?"),
        (U, "Slightly; I volunteered to rewrite the required practicals booklet."),
    ]),
    "exam-distractor": ("2024/03/15 (Fri) 12:00", [
        (U, "My friend asks: are AQA past papers free to download?"),
        (A, "Yes, AQA publishes past papers and mark schemes on its website."),
    ]),
    "car": ("2024/03/25 (Mon) 18:00", [
        (U, "We sold the Astra and bought a second-hand Kia Niro EV, 48,000 miles on the clock."),
        (A, "Check the battery health report; Niros usually age well."),
    ]),
    "car-distractor": ("2024/03/29 (Fri) 09:00", [
        (U, "How long does a home wallbox take to install?"),
        (A, "Usually half a day, after a survey of your consumer unit."),
    ]),
    "migraine": ("2024/04/08 (Mon) 22:30", [
        (U, "Had another migraine after marking until midnight, third one this month."),
        (A, "Late nights and screen time are common triggers. Has your GP suggested anything?"),
        (U, "She prescribed sumatriptan and told me to keep a headache diary."),
    ]),
    "garden-shed": ("2024/04/20 (Sat) 15:30", [
        (U, "Spent the day building a shed at the bottom of the garden for the bikes."),
        (A, "A dry place for bikes saves a lot of rust. Did you put a lock on it?"),
    ]),
    "sportive": ("2024/05/04 (Sat) 19:00", [
        (U, "Entered the Manchester 100 sportive in July, the 100-mile route."),
        (A, "A century is a big goal; build up your long rides by 10 to 15 miles a week."),
    ]),
    "reading": ("2024/05/18 (Sat) 21:40", [
        (U, "I want something to read over half term. I loved Klara and the Sun and Never Let Me Go."),
        (A, "Then try Ishiguro's The Remains of the Day, or Station Eleven by Emily St. John Mandel."),
    ]),
    "kitchen": ("2024/06/01 (Sat) 11:00", [
        (U, "The kitchen renovation starts on the 17th of June; the builders reckon four weeks."),
        (A, "Set up a temporary kitchen with a microwave and a kettle somewhere else in the house."),
    ]),
    "parents-evening": ("2024/06/13 (Thu) 21:00", [
        (U, "Parents' evening ran until half eight; one dad argued about his son's predicted grade for twenty minutes."),
        (A, "That's draining. Keeping notes of the evidence behind each prediction helps in those talks."),
    ]),
    "holiday": ("2024/07/02 (Tue) 20:15", [
        (U, "Booked the summer holiday: a gîte near Annecy for the first two weeks of August."),
        (A, "Lovely. The lake is warm enough to swim in August, and the cycling there is superb."),
    ]),
    "holiday-distractor": ("2024/07/09 (Tue) 10:00", [
        (U, "A colleague wants to visit Lake Como; is it better by train or car from Milan?"),
        (A, "The train to Varenna is easy; a car helps only for the smaller villages."),
    ]),
    "heat-pump": ("2024/07/22 (Mon) 17:30", [
        (U, "The heat pump is finally in, an 8 kW air source unit, and the grant covered 7,500 of it."),
        (A, "Great. Lower flow temperatures and leaving it on steadily give the best efficiency."),
    ]),
    "climbing": ("2024/08/25 (Sun) 18:20", [
        (U, "Went bouldering with the kids at the wall; Maya is fearless, Isaac likes the easy greens."),
        (A, "Sounds like a fun family habit. Kids' sessions often have a coach for technique."),
    ]),
    # ---- later sessions: facts that changed
    "club-switch": ("2024/09/08 (Sun) 13:30", [
        (U, "Moved up to the A group at the Wheelers after the summer, we average about 29 now."),
        (A, "That's a big step up; the summer miles clearly paid off."),
    ]),
    "school-new": ("2024/09/09 (Mon) 17:00", [
        (U, "First week back and I've been made head of physics, so only one Year 11 class now, plus the A-level group."),
        (A, "Congratulations on the promotion! Fewer classes will help with the new admin load."),
    ]),
    "car-new": ("2024/10/12 (Sat) 12:00", [
        (U, "We gave up on the Niro, the range in winter was hopeless for the Lake District trips; we have a Skoda Octavia estate now."),
        (A, "An estate is practical with two kids and bikes to carry."),
    ]),
    "kitchen-late": ("2024/07/15 (Mon) 20:00", [
        (U, "The kitchen is running late, the worktops were cut wrong; now they say it's done by the end of August."),
        (A, "Annoying, but at least they'll be finished before term starts."),
    ]),
    "podcast-new": ("2024/11/03 (Sun) 09:15", [
        (U, "Fell out of love with history podcasts; these days it's audiobooks on the commute, currently Dune."),
        (A, "Dune is a great listen; the full-cast edition is worth trying too."),
    ]),
    # ---- more distractors sharing words
    "knee-distractor": ("2024/11/10 (Sun) 16:40", [
        (U, "My knee aches after long rides; could it be the saddle height?"),
        (A, "Pain at the front of the knee often means the saddle is too low."),
    ]),
    "milk-distractor": ("2024/11/20 (Wed) 08:00", [
        (U, "Is oat milk or almond milk better for a latte?"),
        (A, "Oat milk froths better; barista editions hold the foam best."),
    ]),
    "headache-distractor": ("2024/12/01 (Sun) 14:00", [
        (U, "Do cold showers help with a hangover headache?"),
        (A, "They may help you feel alert, but water and rest do more."),
    ]),
    "party-distractor": ("2024/12/08 (Sun) 19:30", [
        (U, "Ideas for a staff Christmas party that isn't just drinks at the pub?"),
        (A, "An escape room or a cooking class works well for mixed groups."),
    ]),
}

# (id, question_type, variant, question, answer, evidence, outdated)
QUESTIONS: list[tuple[str, str, str, str, str, list[str], list[str]]] = [
    ("b-and-knee", "single-session-user", "exact-and", "knee replaced Wythenshawe", "2 February", ["mum-knee"], []),
    ("b-and-boiler", "single-session-user", "exact-and", "boiler heat exchanger cracked", "a heat pump quote", ["boiler"], []),
    ("b-and-board", "single-session-user", "exact-and", "exam boards AQA OCR practicals", "rewriting the practicals booklet", ["exam-board"], []),
    ("b-and-sportive", "single-session-user", "exact-and", "Manchester 100 sportive", "the 100-mile route in July", ["sportive"], []),
    ("b-and-annecy", "single-session-user", "exact-and", "gîte Annecy August", "first two weeks of August", ["holiday"], []),
    ("b-or-club", "single-session-user", "exact-or", "Wheelers Sunday ride meeting point cafe", "the park gates at 8", ["club-join"], []),
    ("b-or-shed", "single-session-user", "exact-or", "garden shed bikes carpentry timber", "a shed for the bikes", ["garden-shed"], []),
    ("b-or-grant", "single-session-user", "exact-or", "heat pump grant subsidy amount", "7,500", ["heat-pump"], []),
    ("b-or-parents", "single-session-user", "exact-or", "parents evening predicted grade complaint", "a dad argued for twenty minutes", ["parents-evening"], []),
    ("b-or-ishiguro", "single-session-user", "exact-or", "Klara Sun Ishiguro novels list", "Never Let Me Go", ["reading"], []),
    ("b-plain-lactose", "single-session-user", "plain-own-words", "Why do I get stomach cramps after lunch?", "lactose intolerance", ["lactose"], []),
    ("b-plain-tom", "single-session-user", "plain-own-words", "Who will stay with Mum after the operation?", "her brother Tom", ["mum-knee"], []),
    ("b-plain-bouldering", "single-session-user", "plain-own-words", "Which colour problems does Isaac like at the wall?", "the easy greens", ["climbing"], []),
    ("b-plain-gp", "single-session-user", "plain-own-words", "What did my GP prescribe for the migraines?", "sumatriptan", ["migraine"], []),
    ("b-para-twins", "single-session-user", "paraphrase", "How old are my son and daughter going to be this spring?", "seven", ["twins"], []),
    ("b-para-mum", "single-session-user", "paraphrase", "When is my mother's joint surgery?", "2 February", ["mum-knee"], []),
    ("b-para-dairy", "single-session-user", "paraphrase", "What did I find out about my digestion?", "lactose intolerant", ["lactose"], []),
    ("b-para-heating", "single-session-user", "paraphrase", "What broke in the house that left us without warm showers?", "the boiler's heat exchanger", ["boiler"], []),
    ("b-para-headache", "single-session-user", "paraphrase", "What set off my bad head pain this spring?", "marking late at night", ["migraine"], []),
    ("b-para-century", "single-session-user", "paraphrase", "Which long-distance event on two wheels did I sign up for?", "the Manchester 100", ["sportive"], []),
    ("b-para-builders", "single-session-user", "paraphrase", "How long did the tradespeople first say the cooking-area refit would take?", "four weeks", ["kitchen"], []),
    ("b-para-syllabus", "single-session-user", "paraphrase", "Which extra job did I take on when the department changed qualification provider?", "the practicals booklet", ["exam-board"], []),
    ("b-pref-book", "single-session-preference", "preference", "Pick a novel for my next train journey.", "literary, Ishiguro-like", ["reading"], []),
    ("b-pref-drink", "single-session-preference", "preference", "What should I order at the cafe with my cake?", "nothing with dairy milk", ["lactose"], []),
    ("b-pref-listen", "single-session-preference", "preference", "Suggest something for my ears on the way to work.", "podcasts or audiobooks", ["podcast", "podcast-new"], []),
    ("b-pref-weekend", "single-session-preference", "preference", "Plan an active Saturday for the whole family.", "climbing / bouldering with the kids", ["climbing", "twins"], []),
    ("b-ku-club", "knowledge-update", "knowledge-update", "Which group do I ride with at the club?", "the A group", ["club-switch"], ["club-join"]),
    ("b-ku-classes", "knowledge-update", "knowledge-update", "How many Year 11 classes do I teach?", "one", ["school-new"], ["school-start"]),
    ("b-ku-car", "knowledge-update", "knowledge-update", "What car do we drive?", "a Skoda Octavia estate", ["car-new"], ["car"]),
    ("b-ku-kitchen", "knowledge-update", "knowledge-update", "When will the kitchen be finished?", "by the end of August", ["kitchen-late"], ["kitchen"]),
    ("b-ku-commute", "knowledge-update", "knowledge-update", "What do I listen to while commuting?", "audiobooks (Dune)", ["podcast-new"], ["podcast"]),
]
