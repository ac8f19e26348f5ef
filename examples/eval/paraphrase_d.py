"""The third held-out paraphrase set (``paraphrase-d.json``): a fourth person, written before the
fusion was changed for issue 19's updates and implied preferences, and never tuned on.

A hospital pharmacist in Belfast over a year: night shifts and then a day post, a new line
manager, beehives on a garage roof, a coeliac diagnosis, a choir, Portuguese lessons, a half
marathon, a move from a rented flat to a house. Same variants and shape as the other sets (see
make_paraphrase_set.py), with more knowledge updates (nine) than they have, most of them stating
the change without a word that says so ("it's a single hive on the roof" after "two hives"), one
update only twelve days after the statement it replaces, and preferences of which some rest on
two sessions. What the fusion is reported on, not what it is tuned on.
"""

from __future__ import annotations

U, A = "user", "assistant"

SESSIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "flat": ("2024/01/07 (Sun) 18:20", [
        (U, "We're renting a two-bed flat on the Lisburn Road for 850 a month, handy for the hospital."),
        (A, "That's a good spot, close to the cafes and the bus into town."),
    ]),
    "nights": ("2024/01/11 (Thu) 07:50", [
        (U, "I'm a pharmacist at the Royal Victoria, on nights at the moment: four on, four off."),
        (A, "Night shifts are hard on sleep. Blackout blinds and a fixed wind-down routine help."),
        (U, "The quiet hours are good for checking the chemo orders, though."),
    ]),
    "boss": ("2024/01/18 (Thu) 13:05", [
        (U, "My line manager is Declan Hughes, the chief pharmacist for medicines safety."),
        (A, "Do you meet him regularly?"),
        (U, "Once a month, over a coffee in the atrium."),
    ]),
    "bees": ("2024/01/25 (Thu) 19:40", [
        (U, "A beekeeper friend helped me set up two hives on the flat roof of my parents' garage in Comber."),
        (A, "Two colonies is a good start: you can compare them and swap frames if one struggles."),
    ]),
    "bees-distractor": ("2024/02/01 (Thu) 10:15", [
        (U, "My neighbour wants to know whether wasp traps catch honeybees too."),
        (A, "Some do; a trap baited with meat rather than sugar mostly takes wasps."),
    ]),
    "coeliac": ("2024/02/08 (Thu) 17:30", [
        (U, "The blood test came back: I'm coeliac, so even a crumb of wheat, barley or rye leaves me ill for days."),
        (A, "That's a big adjustment but manageable. Watch for oats that aren't certified, and for shared toasters."),
    ]),
    "gluten-distractor": ("2024/02/15 (Thu) 12:40", [
        (U, "A colleague asks what the difference is between gluten-free and wheat-free labels on cakes."),
        (A, "Wheat-free can still contain barley or rye; gluten-free means under 20 parts per million."),
    ]),
    "car": ("2024/02/20 (Tue) 20:10", [
        (U, "Our car is a 2015 Ford Focus diesel that Niamh's dad sold us cheap."),
        (A, "Focuses are reliable. Keep an eye on the clutch at that age."),
    ]),
    "choir": ("2024/02/27 (Tue) 22:00", [
        (U, "Joined the Belfast Community Choir; they put me in the second sopranos."),
        (A, "Community choirs are great fun. What are you rehearsing?"),
        (U, "Fauré's Requiem, for a concert in the Ulster Hall."),
    ]),
    "piano-distractor": ("2024/03/05 (Tue) 16:45", [
        (U, "My niece wants to learn piano; is nine too young to start?"),
        (A, "Not at all, nine is a fine age to begin lessons."),
    ]),
    "portuguese": ("2024/03/12 (Tue) 21:15", [
        (U, "Learning Portuguese on Duolingo for fifteen minutes a day before Niamh and I visit her sister in Porto."),
        (A, "Porto is lovely. European Portuguese sounds quite different from the Brazilian the app teaches, mind."),
    ]),
    "language-distractor": ("2024/03/19 (Tue) 11:30", [
        (U, "Is Spanish or Italian easier to pick up for a week's holiday?"),
        (A, "Both are friendly to English speakers; Spanish pronunciation is a little more regular."),
    ]),
    "half": ("2024/03/26 (Tue) 19:00", [
        (U, "Entered the Belfast half marathon in September; I want to get under two hours."),
        (A, "Very doable with a sixteen-week plan. Do you run with a club?"),
        (U, "Just on my own along the Lagan towpath."),
    ]),
    "run-distractor": ("2024/04/02 (Tue) 08:20", [
        (U, "What's a sensible pace for a friend doing her first 10k?"),
        (A, "Whatever lets her talk in short sentences; about seven minutes a kilometre is common."),
    ]),
    "half-late": ("2024/04/07 (Sun) 15:10", [
        (U, "Physio says the sore knee is patellar tendinopathy; finishing the half in about two and a quarter hours would be a win."),
        (A, "Listen to her: strength work for the tendon will pay off in September."),
    ]),
    "bookclub": ("2024/04/09 (Tue) 23:00", [
        (U, "Our book club meets at Sarah's house on the first Wednesday of the month, with far too much wine."),
        (A, "Sounds like a good club. What's this month's book?"),
        (U, "The Bee Sting by Paul Murray."),
    ]),
    "crime": ("2024/04/16 (Tue) 07:30", [
        (U, "Finished another Tana French in two nights; give me an Irish detective with a slow-burn case and I'm happy."),
        (A, "Then Adrian McKinty's Sean Duffy books, set in Carrickfergus, would suit you."),
    ]),
    "nephew": ("2024/04/23 (Tue) 18:40", [
        (U, "My nephew Ciarán turned nine and talks about nothing but dinosaurs."),
        (A, "Nine-year-olds with a passion are wonderful. Has he got a favourite?"),
        (U, "Anything with feathers; he'll correct you if you draw a raptor scaly."),
    ]),
    "theatre": ("2024/05/04 (Sat) 23:20", [
        (U, "Saw Hamilton at the Grand Opera House from the top of the upper circle, and spent the first act gripping the rail: the drop made me dizzy."),
        (A, "Steep upper circles get a lot of people that way."),
    ]),
    "theatre-distractor": ("2024/05/11 (Sat) 14:00", [
        (U, "Which musical would you take a seven-year-old to see?"),
        (A, "The Lion King or Matilda are safe bets."),
    ]),
    "boss-new": ("2024/05/14 (Tue) 12:50", [
        (U, "Declan left for a post in Dublin; Orla Quinn runs the medicines safety team and signs off my rota."),
        (A, "A new manager is a good time to raise what you'd like to work on."),
    ]),
    "jazz": ("2024/06/01 (Sat) 23:45", [
        (U, "Went to a jazz trio at the Black Box; the double bass solo gave me goosebumps."),
        (A, "Live jazz in a small room is something special."),
    ]),
    "jazz-vinyl": ("2024/06/15 (Sat) 11:10", [
        (U, "Bought a secondhand turntable and Kind of Blue on vinyl, and played it twice through on Sunday morning."),
        (A, "A great first LP. Bill Evans's piano on Blue in Green is gorgeous."),
    ]),
    "kayak": ("2024/06/22 (Sat) 19:30", [
        (U, "Paddled a sea kayak around the islands of Strangford Lough with a guide; seals followed us the whole way."),
        (A, "Strangford is beautiful on a calm day. Watch the tidal race at the narrows."),
    ]),
    "mournes": ("2024/07/06 (Sat) 20:05", [
        (U, "Climbed Slieve Donard from Newcastle and sat on the summit with a flask; I could happily spend every free weekend up in the hills."),
        (A, "The Mournes are wonderful. Slieve Binnian's tors are a good next one."),
    ]),
    "sober": ("2024/07/20 (Sat) 21:40", [
        (U, "Haven't had a drink since Easter and I feel great; the alcohol-free Guinness is surprisingly decent."),
        (A, "Well done. Plenty of pubs have it on draught."),
    ]),
    "nephew-museum": ("2024/08/17 (Sat) 17:00", [
        (U, "Took Ciarán to the Ulster Museum; we spent two hours in front of the Edmontosaurus and he talked me into a fossil-hunting book."),
        (A, "Sounds like a budding palaeontologist. The Jurassic Coast would blow his mind one day."),
    ]),
    "car-new": ("2024/09/02 (Mon) 18:30", [
        (U, "Sold the Focus to a student and bought a secondhand Nissan Leaf; charging it at home costs pennies."),
        (A, "The Leaf is ideal for city driving. Check the battery health bars."),
    ]),
    "car-distractor": ("2024/09/09 (Mon) 09:45", [
        (U, "A colleague asks whether the hospital car park has chargers for electric cars."),
        (A, "Many hospital car parks do; the estates team usually publishes a list of bays."),
    ]),
    "bees-new": ("2024/09/14 (Sat) 16:20", [
        (U, "Varroa wiped out the weaker colony, so it's a single hive on the garage roof in Comber going into winter."),
        (A, "Treat the survivors in autumn and you can split them next spring."),
    ]),
    "shift-new": ("2024/10/01 (Tue) 18:15", [
        (U, "Took the day post in the aseptic unit: Monday to Friday, half eight to five."),
        (A, "Your body clock will thank you after years of nights."),
    ]),
    "choir-new": ("2024/10/08 (Tue) 22:30", [
        (U, "The director asked me to sing alto instead; the second soprano line was too high for me."),
        (A, "Altos often carry the harmony; you'll enjoy it."),
    ]),
    "portuguese-new": ("2024/10/22 (Tue) 21:50", [
        (U, "Dropped the app; on Tuesday evenings I go to a Portuguese class at the Queen's language centre with a teacher from Braga."),
        (A, "A real teacher will help with the pronunciation."),
    ]),
    "house": ("2024/11/05 (Tue) 20:00", [
        (U, "We got the keys to our own house in Holywood yesterday: three bedrooms and a view of the lough!"),
        (A, "Congratulations! The first night in a new home is always memorable."),
    ]),
    "house-distractor": ("2024/11/12 (Tue) 13:20", [
        (U, "My cousin in Bristol asks how stamp duty works for first-time buyers in England."),
        (A, "First-time buyers pay none up to a threshold, then 5% on the part above it."),
    ]),
    "bookclub-new": ("2024/11/19 (Tue) 22:40", [
        (U, "Book club is now upstairs at the Crown Bar, since Sarah had the baby."),
        (A, "The Crown's snugs are perfect for a book chat."),
    ]),
    "pharmacy-distractor": ("2024/12/03 (Tue) 10:00", [
        (U, "A student asks whether hospital or community pharmacy pays better in the UK."),
        (A, "Hospital posts start on band 6; community pay varies more by employer."),
    ]),
    "snack-distractor": ("2024/12/10 (Tue) 19:25", [
        (U, "What are good snacks for a children's party?"),
        (A, "Fruit skewers, popcorn and mini sandwiches always go down well."),
    ]),
}

# (id, question_type, variant, question, answer, evidence, outdated)
QUESTIONS: list[tuple[str, str, str, str, str, list[str], list[str]]] = [
    ("d-and-bees", "single-session-user", "exact-and", "beekeeper hives garage Comber", "two hives", ["bees"], []),
    ("d-and-choir", "single-session-user", "exact-and", "Fauré Requiem Ulster Hall", "the choir's concert", ["choir"], []),
    ("d-and-kayak", "single-session-user", "exact-and", "sea kayak Strangford seals", "seals followed the kayak", ["kayak"], []),
    ("d-and-donard", "single-session-user", "exact-and", "Slieve Donard summit flask", "climbed from Newcastle", ["mournes"], []),
    ("d-and-coeliac", "single-session-user", "exact-and", "coeliac wheat barley rye", "the coeliac diagnosis", ["coeliac"], []),
    ("d-or-flat", "single-session-user", "exact-or", "Lisburn Road flat rent deposit landlord", "850 a month", ["flat"], []),
    ("d-or-car", "single-session-user", "exact-or", "Ford Focus diesel MOT insurance", "bought cheap from Niamh's dad", ["car"], []),
    ("d-or-nephew", "single-session-user", "exact-or", "nephew dinosaurs birthday feathers", "feathered dinosaurs", ["nephew"], []),
    ("d-or-theatre", "single-session-user", "exact-or", "Hamilton Grand Opera House tickets price", "the upper circle", ["theatre"], []),
    ("d-or-jazz", "single-session-user", "exact-or", "jazz trio Black Box drummer", "the double bass solo", ["jazz"], []),
    ("d-plain-declan", "single-session-user", "plain-own-words", "How often do I meet Declan?", "once a month", ["boss"], []),
    ("d-plain-porto", "single-session-user", "plain-own-words", "Who are we visiting in Porto?", "Niamh's sister", ["portuguese"], []),
    ("d-plain-towpath", "single-session-user", "plain-own-words", "Where do I run on my own?", "the Lagan towpath", ["half"], []),
    ("d-plain-detective", "single-session-user", "plain-own-words", "Which author did you suggest after Tana French?", "Adrian McKinty", ["crime"], []),
    ("d-para-diagnosis", "single-session-user", "paraphrase", "What did my recent medical results show?", "coeliac disease", ["coeliac"], []),
    ("d-para-seals", "single-session-user", "paraphrase", "Which animals swam after our boat on the paddling trip?", "seals", ["kayak"], []),
    ("d-para-sibling", "single-session-user", "paraphrase", "What is my sibling's son obsessed with?", "dinosaurs", ["nephew"], []),
    ("d-para-vertigo", "single-session-user", "paraphrase", "Why did I feel unwell at the musical?", "the height of the upper circle", ["theatre"], []),
    ("d-para-summit", "single-session-user", "paraphrase", "Which mountain did I hike from the seaside town?", "Slieve Donard", ["mournes"], []),
    ("d-para-record", "single-session-user", "paraphrase", "What album did I buy along with the record player?", "Kind of Blue", ["jazz-vinyl"], []),
    ("d-para-requiem", "single-session-user", "paraphrase", "What piece is the singing group performing?", "Fauré's Requiem", ["choir"], []),
    ("d-para-inlaw", "single-session-user", "paraphrase", "Which relative of my partner lives in northern Portugal?", "Niamh's sister", ["portuguese"], []),
    ("d-pref-snack", "single-session-preference", "preference", "What can I snack on during a long shift?", "something gluten-free", ["coeliac"], []),
    ("d-pref-gift", "single-session-preference", "preference", "What should I buy my nephew for Christmas?", "something about (feathered) dinosaurs or fossils", ["nephew", "nephew-museum"], []),
    ("d-pref-weekend", "single-session-preference", "preference", "Suggest a weekend away for the autumn.", "somewhere with sea kayaking and hill walking", ["kayak", "mournes"], []),
    ("d-pref-music", "single-session-preference", "preference", "What should I put on the stereo when friends come for dinner?", "jazz, on vinyl", ["jazz", "jazz-vinyl"], []),
    ("d-pref-book", "single-session-preference", "preference", "Recommend something to read on the beach in Porto.", "an Irish crime novel", ["crime"], []),
    ("d-pref-seats", "single-session-preference", "preference", "Where should I sit when I book tickets for the next show?", "low down, not the upper circle", ["theatre"], []),
    ("d-pref-party", "single-session-preference", "preference", "What should I order for myself at the work Christmas party?", "something alcohol-free", ["sober"], []),
    ("d-pref-meal", "single-session-preference", "preference", "Choose a restaurant for our housewarming meal.", "one with a gluten-free menu", ["coeliac"], []),
    ("d-ku-home", "knowledge-update", "knowledge-update", "Where do we live?", "a house in Holywood", ["house"], ["flat"]),
    ("d-ku-hours", "knowledge-update", "knowledge-update", "What hours do I work?", "Monday to Friday, half eight to five", ["shift-new"], ["nights"]),
    ("d-ku-boss", "knowledge-update", "knowledge-update", "Who is my line manager?", "Orla Quinn", ["boss-new"], ["boss"]),
    ("d-ku-hives", "knowledge-update", "knowledge-update", "How many beehives do I keep?", "one", ["bees-new"], ["bees"]),
    ("d-ku-car", "knowledge-update", "knowledge-update", "What do we drive?", "a secondhand Nissan Leaf", ["car-new"], ["car"]),
    ("d-ku-half", "knowledge-update", "knowledge-update", "What finishing time am I hoping for in the half marathon?", "about two and a quarter hours", ["half-late"], ["half"]),
    ("d-ku-portuguese", "knowledge-update", "knowledge-update", "How am I learning Portuguese?", "an evening class at Queen's", ["portuguese-new"], ["portuguese"]),
    ("d-ku-choir", "knowledge-update", "knowledge-update", "Which part do I sing in the choir?", "alto", ["choir-new"], ["choir"]),
    ("d-ku-bookclub", "knowledge-update", "knowledge-update", "Where does the book club meet?", "upstairs at the Crown Bar", ["bookclub-new"], ["bookclub"]),
]
