"""The fourth held-out paraphrase set (``paraphrase-e.json``): a fifth person, written blind to the
ranking (without reading how the archive ranks or running any search on it), and never tuned on.

A bus mechanic in Cardiff over a year: the early and then the late turn at the depot, a foreman
who retires, the old diesels and then the electrics, a rescued greyhound, an allotment, Welsh
classes for a daughter at a Welsh-medium school, a pay ballot, a half-term camping trip that has
to move. Same variants and shape as the other sets (see make_paraphrase_set.py): nine knowledge
updates, seven of them stated without a word that says so ("the late turn, two till ten" after
"the early turn"), one only ten days after the statement it replaces; eight implied preferences,
four resting on two sessions; facts often said in a conversation's second or third turn; and
distractor sessions that share the facts' vocabulary (a cousin's Welsh app, a colleague's lurcher,
Carys's pay deal, a neighbour's leeks). What the ranking is reported on, not what it is tuned on.
"""

from __future__ import annotations

U, A = "user", "assistant"

SESSIONS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "depot-job": ("2024/01/05 (Fri) 16:40", [
        (U, "Back at the depot after Christmas. What's a decent torque wrench for bus wheel nuts that won't break the bank?"),
        (A, "For wheel nuts on a double-decker you want one that reads to about 700 Nm; a 3/4-inch drive from a known brand will last."),
        (U, "Cheers. Most of my day is on the old Enviro400 diesels at Leckwith, and their wheel nuts are a pig to shift."),
        (A, "Older fleets eat time on wheel-end jobs. Loose-nut indicators make the walkround checks quicker."),
    ]),
    "shift-early": ("2024/01/09 (Tue) 20:15", [
        (U, "Is it normal to feel wiped out by eight in the evening? I'm on the early turn, quarter to six till two."),
        (A, "Very normal with a start that early. A fixed bedtime, even at weekends, helps your body clock settle."),
        (U, "The upside is I pick Seren up from school every day."),
    ]),
    "foreman": ("2024/01/16 (Tue) 18:30", [
        (U, "Had my yearly review with the foreman, Gareth Pugh, this afternoon."),
        (A, "How did it go?"),
        (U, "Good, he wants me to mentor the new apprentice, Kyle. Keen as anything but can't find a 10mm socket to save his life."),
        (A, "Mentoring is a vote of confidence. Giving him his own labelled tray of sockets might save you both some time."),
    ]),
    "dog": ("2024/01/21 (Sun) 15:05", [
        (U, "We adopted a retired racing greyhound from the rescue in Newport. Big brindle lad called Dai, five years old."),
        (A, "Ex-racers make lovely pets; most of them are couch potatoes indoors."),
        (U, "He claimed the armchair within an hour. Carys pretends to be annoyed."),
    ]),
    "dog-distractor": ("2024/01/29 (Mon) 19:10", [
        (U, "Next door's spaniel barks like mad every time the post comes. Anything they can try?"),
        (A, "Rewarding calm at the door with treats, and a cage over the letterbox, usually take the edge off it."),
    ]),
    "welsh": ("2024/02/03 (Sat) 11:20", [
        (U, "Signed up for a Welsh class, Thursday nights at Canton library. It's the Mynediad course, for complete beginners."),
        (A, "Da iawn! Mynediad is a gentle start. What made you take it up?"),
        (U, "Seren's at a Welsh-medium school and I can't help with her homework. Embarrassing when she's seven."),
        (A, "Plenty of parents learn alongside their children; she'll love correcting you."),
    ]),
    "welsh-distractor": ("2024/02/10 (Sat) 10:00", [
        (U, "My cousin in Swansea wants to learn Welsh but only has time for an app. Which one's best?"),
        (A, "Say Something in Welsh is good for speaking; Duolingo is fine for building vocabulary."),
    ]),
    "knees": ("2024/02/14 (Wed) 21:30", [
        (U, "Fifteen years kneeling in pits and crawling under chassis has done my knees in. Stairs are agony by Friday."),
        (A, "Knee pads and a creeper board help at work. Have you had them looked at?"),
        (U, "The GP says it's wear and tear, nothing torn. Told me to keep moving but go easy on them."),
    ]),
    "spicy": ("2024/02/18 (Sun) 22:10", [
        (U, "Carys made a chicken vindaloo for her sister's birthday and I spent the whole evening with my mouth on fire, drinking milk."),
        (A, "Vindaloo is fierce. Yoghurt or raita cools it far better than water."),
        (U, "Everyone else loved it. I ended up on rice and naan."),
    ]),
    "allotment": ("2024/02/24 (Sat) 17:45", [
        (U, "We finally got an allotment! Plot 14 at Pengam Green, after two years on the waiting list."),
        (A, "Brilliant news. Late winter is a good time to dig over the beds and plan what goes where."),
        (U, "It's only a half plot, so spuds, onions and a row of runner beans to start with."),
    ]),
    "allotment-distractor": ("2024/03/02 (Sat) 13:30", [
        (U, "The old boy on the next plot asked me what's eating his leeks. Little orange grubs inside the stems."),
        (A, "That sounds like allium leaf miner. Covering the crop with fine netting from early spring keeps the flies off."),
    ]),
    "flying": ("2024/03/09 (Sat) 21:00", [
        (U, "Carys fancies Tenerife for Easter. Last time we flew I gripped the armrest for four hours and didn't sleep the night before."),
        (A, "A lot of people dread flying. Some airlines run courses for nervous flyers."),
        (U, "Maybe. The ferry to Rosslare a couple of summers back was the best bit of that whole holiday, mind."),
    ]),
    "tacho-distractor": ("2024/03/14 (Thu) 12:15", [
        (U, "A mate who drives for a coach firm in Bridgend asks how often the tachograph has to be calibrated."),
        (A, "Every two years in the UK, and after certain repairs or a change of tyre size."),
    ]),
    "rugby": ("2024/03/16 (Sat) 19:40", [
        (U, "Watched Wales lose to Italy with Dad in the Cayo Arms. Wooden spoon. I need a pint and a lie down."),
        (A, "A tough Six Nations, but a lot of young players got their first caps."),
    ]),
    "seren-horse": ("2024/03/23 (Sat) 18:20", [
        (U, "Took Seren to the farm park near Cowbridge. She spent the whole afternoon at the pony paddock and cried when we had to leave."),
        (A, "Sounds like she's found her favourite animal. Did she get a ride?"),
        (U, "Five minutes on a lead rein. She's talked about nothing else since."),
    ]),
    "teacher": ("2024/03/27 (Wed) 21:05", [
        (U, "Parents' evening tonight. Seren's teacher, Mrs Probert, says her reading has come on loads but her maths needs work."),
        (A, "That's a good report overall. Little and often helps with maths: ten minutes a day beats an hour at the weekend."),
        (U, "Mrs Probert suggested times-table games in the car on the way to school."),
    ]),
    "pay-offer": ("2024/04/04 (Thu) 17:20", [
        (U, "Management's pay offer came in at 3% for the fitters. The union's balloting on it but nobody's happy."),
        (A, "Ballots take a few weeks. Is there talk of industrial action?"),
        (U, "Not yet. Most of us want at least 5 to keep up with the rent."),
    ]),
    "music": ("2024/04/13 (Sat) 18:00", [
        (U, "Had Super Furry Animals on the workshop radio all day; even Kyle was humming along to Hermann Loves Pauline."),
        (A, "A classic. Do you know Gruff Rhys's solo records?"),
        (U, "Love them. Got tickets for his gig at Tramshed next month, can't wait."),
    ]),
    "carys-job": ("2024/04/20 (Sat) 10:30", [
        (U, "Any tips for juggling the school run? Carys works shifts on the claims line at an insurance call centre in the Bay."),
        (A, "Two shift patterns and a young child is a lot. Is there family nearby who can help?"),
        (U, "My mam has Seren on Wednesdays, thank God, and the after-school club covers the rest."),
    ]),
    "foreman-new": ("2024/04/29 (Mon) 18:50", [
        (U, "Gareth retired at Easter and Bethan Lloyd is running the workshop floor. First thing she did was sort out the parts ordering."),
        (A, "A fresh pair of eyes on parts can save a lot of waiting around. How's the team taking it?"),
        (U, "Fine. She came up through the fitters, so she knows the job."),
    ]),
    "pay-distractor": ("2024/05/02 (Thu) 20:00", [
        (U, "Carys's union at the call centre accepted 4% this year. Is that above inflation?"),
        (A, "Consumer prices were rising at a little over 2% a year this spring, so 4% is a modest real-terms rise."),
    ]),
    "camping-plan": ("2024/05/10 (Fri) 21:15", [
        (U, "Booked a pitch at a campsite near Tenby for half term, the 27th to the 31st. Seren's first time in a tent!"),
        (A, "Tenby's a good pick with kids; the harbour beach is sheltered. Take extra blankets, May nights are cold."),
    ]),
    "camping-distractor": ("2024/05/14 (Tue) 13:00", [
        (U, "Kyle is taking his girlfriend wild camping in the Brecon Beacons. Is that even allowed?"),
        (A, "Not without the landowner's permission in most of Wales; a basic campsite is the safe bet."),
    ]),
    "music-gig": ("2024/05/18 (Sat) 23:30", [
        (U, "Stood right at the front for Gruff Rhys tonight and sang every word, even the Welsh ones. My Mynediad paid off."),
        (A, "Nothing beats a gig where you know every word. Did he play any Super Furries songs?"),
        (U, "Two in the encore. Carys says I've not stopped grinning."),
    ]),
    "camping-new": ("2024/05/20 (Mon) 19:30", [
        (U, "The Tenby site emailed: the field's waterlogged. Found a pitch at Three Cliffs on Gower for the same dates."),
        (A, "Three Cliffs has one of the best views in Wales. It's a steep walk down to the beach, mind."),
        (U, "Seren's already packed her bucket and spade."),
    ]),
    "pay-deal": ("2024/06/05 (Wed) 17:40", [
        (U, "Ballot result's in: 5% for the fitters, backdated to April, plus a hundred quid on the tool allowance."),
        (A, "That's a decent result. The back pay should land in a month or two."),
    ]),
    "dog-park": ("2024/06/15 (Sat) 16:30", [
        (U, "Let Dai off the lead in Bute Park for the first time. He saw a squirrel, hit about forty miles an hour and I spent half an hour chasing him round the arboretum."),
        (A, "Sighthounds chase on instinct; once they've locked on, recall rarely wins. Glad you got him back."),
        (U, "Me too. My heart's still going."),
    ]),
    "lurcher-distractor": ("2024/06/22 (Sat) 11:00", [
        (U, "A fitter at work has a lurcher that pulls like a train on the lead. Harness or head collar?"),
        (A, "A front-clip harness is kinder on a sighthound's neck; pair it with short, rewarded training walks."),
    ]),
    "reading": ("2024/07/06 (Sat) 22:45", [
        (U, "Read The Dam Busters by Paul Brickhill in three evenings; the bouncing bomb trials were brilliant."),
        (A, "A proper classic. James Holland's Dam Busters is the modern retelling, with more on the crews."),
        (U, "Already on the library list."),
    ]),
    "shift-distractor": ("2024/07/12 (Fri) 14:20", [
        (U, "My brother-in-law works earlies at the Royal Mail sorting office, four till twelve. Does shift work push your blood pressure up?"),
        (A, "Studies link long-term shift work to higher blood pressure, mostly through poor sleep; regular check-ups are sensible."),
    ]),
    "dahlias": ("2024/07/20 (Sat) 20:10", [
        (U, "Spent the day at Dyffryn Gardens. Carys took about three hundred photos of the dahlias."),
        (A, "The dahlia borders there are at their best in late summer. Did she get any good ones?"),
        (U, "Loads. She's got eight varieties in pots out the back and she's out there with the camera every evening."),
    ]),
    "shift-late": ("2024/08/05 (Mon) 23:05", [
        (U, "Home at half ten again. On the late turn, two till ten, I only see Seren at breakfast and it's getting me down."),
        (A, "That's hard on both of you. Could you ask to swap a couple of turns a week?"),
        (U, "I'll ask Bethan tomorrow."),
    ]),
    "podcast": ("2024/08/10 (Sat) 12:30", [
        (U, "Listening to a podcast on the Battle of Britain while I do brake jobs. The engineering of the Merlin engine is fascinating."),
        (A, "The Merlin is a great story: Rolls-Royce kept squeezing more power out of it all through the war."),
    ]),
    "seren-draws": ("2024/08/24 (Sat) 19:00", [
        (U, "Seren filled a whole sketchbook over the summer holidays and I've just counted: forty-one horses, every one with a name."),
        (A, "That's dedication. Has she got a favourite?"),
        (U, "Biscuit, a palomino with a pink mane."),
    ]),
    "horse-distractor": ("2024/08/31 (Sat) 10:40", [
        (U, "A lad at work keeps a horse at a livery yard near Caerphilly. What does full livery usually cost?"),
        (A, "Full livery around South Wales often runs to several hundred pounds a month, depending on the yard."),
    ]),
    "teacher-new": ("2024/09/10 (Tue) 18:10", [
        (U, "Seren's in year 3 with Mr Ahmed, who also runs the school chess club. She came home buzzing."),
        (A, "A teacher who runs a club is usually a good sign. Is she going to join?"),
        (U, "She's already asked for a chess set for Christmas."),
    ]),
    "carys-new": ("2024/09/16 (Mon) 20:20", [
        (U, "Carys has moved from the call centre to the council's planning department, nine to five, and she's a different woman."),
        (A, "Regular hours make a huge difference. Does it help with the school run?"),
        (U, "She can do most of the pickups herself."),
    ]),
    "welsh-new": ("2024/09/26 (Thu) 22:15", [
        (U, "Passed Mynediad over the summer! Signed up for Sylfaen, Wednesday nights at the Cathays centre."),
        (A, "Llongyfarchiadau! Sylfaen is where you start holding real conversations."),
    ]),
    "fishing": ("2024/10/05 (Sat) 09:50", [
        (U, "Up at five with Dad and caught a 4lb bass off Penarth pier at dawn. First decent fish all year."),
        (A, "A four-pound bass from the pier is a proper fish! Did you keep it?"),
        (U, "Put it back; Dad had his photo with it though."),
    ]),
    "carys-photo": ("2024/10/12 (Sat) 17:20", [
        (U, "Carys entered a photo of her Café au Lait dahlia in the Pengam allotment show and came second out of thirty."),
        (A, "Second out of thirty is brilliant. Is she thinking of entering more competitions?"),
        (U, "She's eyeing up a macro lens already."),
    ]),
    "buses-electric": ("2024/10/14 (Mon) 19:45", [
        (U, "Passed the high-voltage course last week, so I'm on the new Yutong electrics most days now. Quiet as anything in the workshop."),
        (A, "Well done. HV work needs a lot of care, but there's far less to go wrong than on a diesel."),
    ]),
    "allotment-new": ("2024/11/02 (Sat) 15:10", [
        (U, "Took on plot 31 by the gate at Pengam: a full plot with a shed and a water butt, and a bit of shade for Dai."),
        (A, "A shed makes all the difference in winter. What are you planning to put in first?"),
        (U, "Garlic and broad beans this month."),
    ]),
    "curry-distractor": ("2024/12/06 (Fri) 12:40", [
        (U, "Kyle's bringing a Thai green curry to the depot Christmas do. How hot is that usually?"),
        (A, "It varies a lot; green curry can be fiery because of the fresh chillies, so ask him to go easy."),
    ]),
}

# (id, question_type, variant, question, answer, evidence, outdated)
QUESTIONS: list[tuple[str, str, str, str, str, list[str], list[str]]] = [
    ("e-and-dog", "single-session-user", "exact-and", "retired racing greyhound rescue Newport", "Dai, a brindle greyhound", ["dog"], []),
    ("e-and-rugby", "single-session-user", "exact-and", "Wales Italy Cayo Arms wooden spoon", "watched it with Dad", ["rugby"], []),
    ("e-and-bass", "single-session-user", "exact-and", "bass Penarth pier dawn", "a 4lb bass", ["fishing"], []),
    ("e-and-vindaloo", "single-session-user", "exact-and", "chicken vindaloo sister birthday milk", "Carys's vindaloo", ["spicy"], []),
    ("e-and-apprentice", "single-session-user", "exact-and", "mentor apprentice Kyle socket", "Kyle", ["foreman"], []),
    ("e-or-farm", "single-session-user", "exact-or", "Cowbridge farm park pony horse birthday", "the pony paddock", ["seren-horse"], []),
    ("e-or-tramshed", "single-session-user", "exact-or", "Gruff Rhys Tramshed tickets support act", "tickets for Gruff Rhys at Tramshed", ["music"], []),
    ("e-or-dyffryn", "single-session-user", "exact-or", "Dyffryn Gardens dahlias photos entry fee", "Carys photographed the dahlias", ["dahlias"], []),
    ("e-or-leeks", "single-session-user", "exact-or", "leeks grubs allotment pest netting", "allium leaf miner", ["allotment-distractor"], []),
    ("e-or-parents", "single-session-user", "exact-or", "parents evening Seren maths homework tutor", "reading good, maths needs work", ["teacher"], []),
    ("e-plain-mam", "single-session-user", "plain-own-words", "Which day does my mam have Seren?", "Wednesdays", ["carys-job"], []),
    ("e-plain-halfplot", "single-session-user", "plain-own-words", "What am I growing on the half plot?", "spuds, onions and runner beans", ["allotment"], []),
    ("e-plain-gp", "single-session-user", "plain-own-words", "What did the GP say about my knees?", "wear and tear, nothing torn", ["knees"], []),
    ("e-plain-chess", "single-session-user", "plain-own-words", "What has Seren asked for for Christmas?", "a chess set", ["teacher-new"], []),
    ("e-para-dog", "single-session-user", "paraphrase", "What's the name and breed of the animal we took in this winter?", "Dai, a greyhound", ["dog"], []),
    ("e-para-joints", "single-session-user", "paraphrase", "Why are my joints so sore by the weekend?", "years of kneeling in pits: wear and tear", ["knees"], []),
    ("e-para-dish", "single-session-user", "paraphrase", "Which dish at a family celebration left me gulping dairy?", "Carys's chicken vindaloo", ["spicy"], []),
    ("e-para-sunrise", "single-session-user", "paraphrase", "What did I land at sunrise with my father?", "a 4lb bass", ["fishing"], []),
    ("e-para-lessons", "single-session-user", "paraphrase", "Which evening lessons did I book so I could assist my daughter with her studies?", "the Mynediad Welsh course", ["welsh"], []),
    ("e-para-wages", "single-session-user", "paraphrase", "How much did the bosses first propose for our wages?", "3%", ["pay-offer"], []),
    ("e-para-creature", "single-session-user", "paraphrase", "Which creature did my little girl fall for on our day out?", "ponies", ["seren-horse"], []),
    ("e-para-sprint", "single-session-user", "paraphrase", "What made our dog bolt across the gardens in the middle of town?", "a squirrel", ["dog-park"], []),
    ("e-pref-fitness", "single-session-preference", "preference", "Suggest a way for me to get fitter this year.", "something low-impact and easy on the knees (swimming, cycling), not running", ["knees"], []),
    ("e-pref-takeaway", "single-session-preference", "preference", "Pick a takeaway for me for Friday night.", "something mild, nothing hot", ["spicy"], []),
    ("e-pref-drive", "single-session-preference", "preference", "What should we play in the car on the drive down to Gower?", "Super Furry Animals or Gruff Rhys", ["music", "music-gig"], []),
    ("e-pref-holiday", "single-session-preference", "preference", "Where should the three of us go for a week this summer?", "somewhere reachable by car or ferry, no flights", ["flying"], []),
    ("e-pref-seren", "single-session-preference", "preference", "What should we get Seren for her eighth birthday?", "riding lessons or something with ponies", ["seren-horse", "seren-draws"], []),
    ("e-pref-gallop", "single-session-preference", "preference", "Where can Dai have a proper gallop?", "a secure enclosed field, not an open park", ["dog-park"], []),
    ("e-pref-book", "single-session-preference", "preference", "Recommend a book for me to take camping.", "Second World War aviation history", ["reading", "podcast"], []),
    ("e-pref-anniversary", "single-session-preference", "preference", "What should I get Carys for our anniversary?", "something for her dahlias or her photography (a macro lens)", ["dahlias", "carys-photo"], []),
    ("e-ku-shift", "knowledge-update", "knowledge-update", "What hours am I working at the depot?", "the late turn, two till ten", ["shift-late"], ["shift-early"]),
    ("e-ku-foreman", "knowledge-update", "knowledge-update", "Who is the foreman at work?", "Bethan Lloyd", ["foreman-new"], ["foreman"]),
    ("e-ku-welsh", "knowledge-update", "knowledge-update", "Which Welsh course am I on?", "Sylfaen, Wednesday nights in Cathays", ["welsh-new"], ["welsh"]),
    ("e-ku-camping", "knowledge-update", "knowledge-update", "Where are we camping at half term?", "Three Cliffs on Gower", ["camping-new"], ["camping-plan"]),
    ("e-ku-pay", "knowledge-update", "knowledge-update", "What pay rise are the fitters getting this year?", "5%, backdated to April", ["pay-deal"], ["pay-offer"]),
    ("e-ku-teacher", "knowledge-update", "knowledge-update", "Who is Seren's teacher?", "Mr Ahmed", ["teacher-new"], ["teacher"]),
    ("e-ku-buses", "knowledge-update", "knowledge-update", "What buses do I spend most of my time on?", "the Yutong electrics", ["buses-electric"], ["depot-job"]),
    ("e-ku-carys", "knowledge-update", "knowledge-update", "Where does Carys work?", "the council's planning department", ["carys-new"], ["carys-job"]),
    ("e-ku-plot", "knowledge-update", "knowledge-update", "Which allotment plot is ours?", "plot 31, by the gate", ["allotment-new"], ["allotment"]),
]
