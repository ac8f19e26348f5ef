"""The second held-out paraphrase set (``paraphrase-c.json``): a third person, written before the
fusion was changed for the first held-out set, and never tuned on.

A freelance illustrator in Cardiff over a year: a picture-book commission, a rowing club, an
allotment, hens in the back garden, a father with new hearing aids, a cousin's wedding. Same
variants and shape as the first two sets (see make_paraphrase_set.py); what the fusion is
reported on, not what it is tuned on.
"""

from __future__ import annotations

U, A = "user", "assistant"

SESSIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "studio": ("2024/01/09 (Tue) 09:30", [
        (U, "I've rented a desk in a shared studio in Splott for my illustration work, 220 a month."),
        (A, "A shared studio is good for company and for meeting other freelancers."),
        (U, "There's a printmaker and two animators in there, so the kettle is always on."),
    ]),
    "commission": ("2024/01/16 (Tue) 14:10", [
        (U, "Signed the contract to illustrate a children's picture book about a family of otters for Firefly Press."),
        (A, "Congratulations! How many spreads, and when is it due?"),
        (U, "Twelve spreads plus the cover, final artwork due at the end of April."),
    ]),
    "rowing": ("2024/01/23 (Tue) 21:00", [
        (U, "Joined the rowing club on the Taff; I'm in a coxless four that trains Tuesday and Thursday evenings."),
        (A, "Sweep rowing in a four is a great introduction. Mind the cold water this time of year."),
    ]),
    "rowing-distractor": ("2024/01/27 (Sat) 11:00", [
        (U, "What's the difference between sculling and sweep rowing, for a friend who wants to try it?"),
        (A, "Scullers hold two oars each; sweep rowers hold one, with the crew alternating sides."),
    ]),
    "tax": ("2024/01/29 (Mon) 18:30", [
        (U, "Filed my self-assessment at last: I owe 2,300 by the 31st, and Gareth Pugh is doing my books from now on."),
        (A, "Well done getting it in. Putting a share of every invoice aside makes next January easier."),
    ]),
    "dad-hearing": ("2024/02/06 (Tue) 17:45", [
        (U, "Dad finally got hearing aids from the audiology clinic at the Heath."),
        (A, "That can change a lot. How is he getting on with them?"),
        (U, "He keeps turning the telly down and says the birds in the garden are deafening now."),
    ]),
    "tablet": ("2024/02/15 (Thu) 20:20", [
        (U, "Swapped my old Wacom for an iPad Pro and Procreate, so I can sketch on the sofa."),
        (A, "Procreate's brushes are lovely for picture-book work. Do you export layered files?"),
    ]),
    "tablet-distractor": ("2024/02/19 (Mon) 12:15", [
        (U, "My neighbour asks whether a Kindle or a Kobo is better for borrowing library ebooks."),
        (A, "Kobo reads library loans directly; a Kindle needs a workaround in the UK."),
    ]),
    "hotpot": ("2024/03/02 (Sat) 23:10", [
        (U, "Went for Sichuan hotpot with the studio crowd; the numbing peppercorn broth was the best thing I've eaten all year."),
        (A, "Mala broth is addictive. Did you go for the split pot or brave the full red one?"),
        (U, "Full red, eyes streaming, and I'd go back tomorrow."),
    ]),
    "allotment": ("2024/03/11 (Mon) 16:00", [
        (U, "After two years on the waiting list we got an allotment plot in Roath; broad beans and garlic are going in first."),
        (A, "Good early crops. Autumn-sown garlic does best, but spring cloves still give decent bulbs."),
    ]),
    "slug-distractor": ("2024/03/18 (Mon) 08:40", [
        (U, "How do people keep slugs off lettuces without using pellets?"),
        (A, "Copper tape, beer traps and going out with a torch after rain all help."),
    ]),
    "wrist": ("2024/03/27 (Wed) 19:50", [
        (U, "My drawing hand has been tingling for weeks; the physio says it's repetitive strain."),
        (A, "That's common with long drawing sessions. What did she suggest?"),
        (U, "A break every forty minutes and a splint at night."),
    ]),
    "hens": ("2024/04/06 (Sat) 10:30", [
        (U, "We got three hens for the back garden, named Dolly, Shirley and Bassey."),
        (A, "Lovely names! A sturdy run with a buried skirt keeps foxes out."),
    ]),
    "films": ("2024/04/14 (Sun) 21:30", [
        (U, "Rewatched Paddington 2 and Spirited Away this weekend; I never tire of hand-drawn animation and kind, gentle stories."),
        (A, "Then The Red Turtle and Wolfwalkers would suit you well."),
    ]),
    "wedding": ("2024/04/25 (Thu) 18:05", [
        (U, "My cousin Rhian is getting married in Tenby on the 14th of September, and I'm designing the invitations."),
        (A, "What a lovely job to be asked to do. Are they thinking watercolour or letterpress?"),
        (U, "Watercolour seabirds with gold lettering."),
    ]),
    "wedding-distractor": ("2024/05/02 (Thu) 13:00", [
        (U, "What's a normal amount to give as a wedding present for a colleague I barely know?"),
        (A, "Somewhere around thirty to fifty pounds is usual for a colleague."),
    ]),
    "trip": ("2024/05/10 (Fri) 20:40", [
        (U, "Booked the train to Copenhagen via Brussels and Hamburg for the first week of June, no flying this year."),
        (A, "A great journey. The Hamburg to Copenhagen leg is beautiful along the coast."),
    ]),
    "trip-distractor": ("2024/05/16 (Thu) 09:10", [
        (U, "A friend flying to Oslo wants to know if she'll need Norwegian cash."),
        (A, "Hardly; cards and phone payments work almost everywhere in Norway."),
    ]),
    "birds": ("2024/06/20 (Thu) 08:15", [
        (U, "Dad sits at the kitchen window every morning with his binoculars, counting the goldfinches on the feeder."),
        (A, "That's a lovely routine. Is he keeping a list of what he spots?"),
        (U, "A notebook full of them, with dates."),
    ]),
    "swim": ("2024/07/06 (Sat) 12:30", [
        (U, "Started sea swimming at Barry Island on Saturday mornings with a group from the club; freezing, but I feel brilliant afterwards."),
        (A, "Cold-water swimming is a great reset. Build up your time in the water slowly."),
    ]),
    "beach-distractor": ("2024/07/13 (Sat) 15:00", [
        (U, "Which beaches near Swansea are best for rock pooling with children?"),
        (A, "Rhossili and Port Eynon have good pools at low tide."),
    ]),
    # ---- later sessions: facts that changed
    "commission-late": ("2024/04/18 (Thu) 10:00", [
        (U, "Firefly pushed the otter book back to mid-June; the author rewrote the ending, so three spreads change."),
        (A, "More time, at least. Will they pay for the redrawn spreads?"),
    ]),
    "hens-fox": ("2024/08/04 (Sun) 09:20", [
        (U, "A fox dug under the run on Thursday night and took Shirley, so we're down to two birds."),
        (A, "I'm sorry. Burying mesh a foot down around the run should stop it happening again."),
    ]),
    "rowing-new": ("2024/09/03 (Tue) 22:00", [
        (U, "Our four broke up over the summer, so I've moved to single sculls with the Saturday morning squad."),
        (A, "Sculling on your own is a good test of technique. Enjoy the quieter river."),
    ]),
    "tablet-new": ("2024/09/21 (Sat) 14:45", [
        (U, "Cracked the iPad screen, and the repair costs more than it's worth, so I'm back on a Cintiq plugged into the desktop."),
        (A, "A Cintiq is sturdier for long sessions anyway. Remember to recalibrate the pen."),
    ]),
    "studio-new": ("2024/10/07 (Mon) 09:00", [
        (U, "Gave up the Splott desk to save money; I work from the spare room at home now."),
        (A, "Keep the door shut at five so home doesn't become the office."),
    ]),
    "accountant-new": ("2024/11/12 (Tue) 16:30", [
        (U, "Gareth is retiring, so my books go to Siân Morgan at Morgan & Bevan from next month."),
        (A, "Send her last year's return early so she has a picture of your income."),
    ]),
    # ---- more distractors sharing words
    "hearing-distractor": ("2024/11/20 (Wed) 19:00", [
        (U, "Are noise-cancelling headphones bad for your ears on long flights?"),
        (A, "Not in themselves; keep the volume moderate and give your ears breaks."),
    ]),
    "spice-distractor": ("2024/11/28 (Thu) 12:20", [
        (U, "My flatmate asks how long dried chillies keep in the cupboard."),
        (A, "About a year at their best; they lose heat and colour after that."),
    ]),
    "drawing-distractor": ("2024/12/05 (Thu) 17:00", [
        (U, "Which pencils would you give an eight-year-old who likes drawing?"),
        (A, "A set of soft graphite pencils and a good sketchbook is a great start."),
    ]),
    "christmas-distractor": ("2024/12/12 (Thu) 20:00", [
        (U, "Ideas for a secret Santa present under ten pounds for the studio?"),
        (A, "Nice biscuits, a plant cutting or a small print of your own work."),
    ]),
}

# (id, question_type, variant, question, answer, evidence, outdated)
QUESTIONS: list[tuple[str, str, str, str, str, list[str], list[str]]] = [
    ("c-and-otter", "single-session-user", "exact-and", "picture book otters Firefly", "the otter picture book", ["commission"], []),
    ("c-and-hearing", "single-session-user", "exact-and", "hearing aids audiology Heath", "Dad's hearing aids", ["dad-hearing"], []),
    ("c-and-hotpot", "single-session-user", "exact-and", "Sichuan hotpot peppercorn broth", "the numbing broth", ["hotpot"], []),
    ("c-and-tenby", "single-session-user", "exact-and", "Rhian married Tenby invitations", "14 September", ["wedding"], []),
    ("c-and-train", "single-session-user", "exact-and", "Copenhagen train Brussels Hamburg", "the first week of June", ["trip"], []),
    ("c-or-allotment", "single-session-user", "exact-or", "allotment Roath waiting list seeds catalogue", "broad beans and garlic", ["allotment"], []),
    ("c-or-tax", "single-session-user", "exact-or", "self-assessment owe HMRC penalty", "2,300", ["tax"], []),
    ("c-or-studio", "single-session-user", "exact-or", "printmaker animators studio rent deposit", "220 a month", ["studio"], []),
    ("c-or-hens", "single-session-user", "exact-or", "hens names Dolly Shirley poultry breed", "Dolly, Shirley and Bassey", ["hens"], []),
    ("c-or-swim", "single-session-user", "exact-or", "Barry Island swimming wetsuit thickness", "Saturday mornings", ["swim"], []),
    ("c-plain-wrist", "single-session-user", "plain-own-words", "What did the physio say about my drawing hand?", "a break every forty minutes, a splint at night", ["wrist"], []),
    ("c-plain-dad", "single-session-user", "plain-own-words", "What does Dad say about the birds in the garden now?", "they're deafening", ["dad-hearing"], []),
    ("c-plain-seabirds", "single-session-user", "plain-own-words", "What am I putting on Rhian's invitations?", "watercolour seabirds with gold lettering", ["wedding"], []),
    ("c-plain-spreads", "single-session-user", "plain-own-words", "How many spreads is the otter book?", "twelve plus the cover", ["commission"], []),
    ("c-para-ears", "single-session-user", "paraphrase", "What medical devices did my father receive recently?", "hearing aids", ["dad-hearing"], []),
    ("c-para-rsi", "single-session-user", "paraphrase", "What is wrong with the fingers I sketch with?", "repetitive strain", ["wrist"], []),
    ("c-para-poultry", "single-session-user", "paraphrase", "What are our chickens called?", "Dolly, Shirley and Bassey", ["hens"], []),
    ("c-para-veg", "single-session-user", "paraphrase", "Which vegetables went in before anything else on the new growing patch?", "broad beans and garlic", ["allotment"], []),
    ("c-para-railway", "single-session-user", "paraphrase", "How am I travelling to Denmark this summer?", "by train via Brussels and Hamburg", ["trip"], []),
    ("c-para-hmrc", "single-session-user", "paraphrase", "How much did I have to pay the taxman this winter?", "2,300", ["tax"], []),
    ("c-para-cousin", "single-session-user", "paraphrase", "Where is my relative's ceremony being held in the autumn?", "Tenby", ["wedding"], []),
    ("c-para-workspace", "single-session-user", "paraphrase", "Who else shares the place I hired at the start of the year?", "a printmaker and two animators", ["studio"], []),
    ("c-pref-film", "single-session-preference", "preference", "What should we put on for movie night?", "gentle hand-drawn animation", ["films"], []),
    ("c-pref-restaurant", "single-session-preference", "preference", "Recommend somewhere to eat for my birthday dinner.", "fiery Sichuan food", ["hotpot"], []),
    ("c-pref-gift", "single-session-preference", "preference", "What could I get my father for Christmas?", "something for birdwatching", ["birds"], []),
    ("c-pref-weekend", "single-session-preference", "preference", "Suggest a way to start my weekend feeling refreshed.", "a cold sea swim", ["swim"], []),
    ("c-pref-holiday", "single-session-preference", "preference", "How should I get to Italy for a holiday in the spring?", "overland, not flying", ["trip"], []),
    ("c-ku-deadline", "knowledge-update", "knowledge-update", "When is the otter book artwork due?", "mid-June", ["commission-late"], ["commission"]),
    ("c-ku-hens", "knowledge-update", "knowledge-update", "How many hens do we keep?", "two", ["hens-fox"], ["hens"]),
    ("c-ku-rowing", "knowledge-update", "knowledge-update", "What kind of boat do I row at the club?", "a single scull", ["rowing-new"], ["rowing"]),
    ("c-ku-tablet", "knowledge-update", "knowledge-update", "What do I draw on for my illustrations?", "a Cintiq", ["tablet-new"], ["tablet"]),
    ("c-ku-studio", "knowledge-update", "knowledge-update", "Where do I work during the day?", "the spare room at home", ["studio-new"], ["studio"]),
    ("c-ku-books", "knowledge-update", "knowledge-update", "Who does my accounts?", "Siân Morgan", ["accountant-new"], ["tax"]),
]
