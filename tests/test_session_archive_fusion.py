"""The fusion rules of the archive's hybrid ranking (hybrid.py), each on a small inline corpus in a
real SQLite archive with the deterministic topic embedder of tests/embedder_support.py (its
vectors are topic counts, so cosines are known in advance); one test with the real
all-MiniLM-L6-v2 when it is installed.

Rules: no recency prior; the ranking is never reordered by a presumed update: a later
conversation is named beside an earlier one (``newer``) only when it is on the same topic, at
least ``update_days`` later, relevant to the question in its own right, states a change (a change
word, or a new value of something the earlier one named), and the question asks about the present
state; without an embedder the word ranking is exactly the lexical one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

np = pytest.importorskip("numpy")

from embedder_support import TopicEmbedder  # noqa: E402

from hermes_core.embeddings import GuardedEmbedder  # noqa: E402
from hermes_core.plugins.memory.session_archive import SessionArchive  # noqa: E402
from hermes_core.plugins.memory.session_archive.hybrid import (  # noqa: E402
    Policy,
    asks_current,
    hybrid_candidates,
    states_change,
    values,
)
from hermes_core.plugins.memory.session_archive.search import plan_query, run_plan  # noqa: E402
from hermes_core.plugins.memory.session_archive.vector_index import VectorIndex  # noqa: E402
from hermes_core.plugins.memory.session_archive.vectors import reindex  # noqa: E402
from hermes_core.types import Message, Session  # noqa: E402

DAY = 86400.0
T0 = 1_700_000_000.0


class Topics(TopicEmbedder):
    topics: ClassVar[dict[str, int]] = {
        "editor": 0, "helix": 0, "neovim": 0, "vim": 0,
        "pet": 1, "dog": 1, "whippet": 1, "vet": 1,
        "flat": 2, "landlord": 2, "rent": 2,
        "trip": 3, "flight": 3, "lisbon": 3}


def build(tmp_path: Path, sessions: list[tuple[str, float, list[str]]],
          ) -> tuple[SessionArchive, GuardedEmbedder, VectorIndex]:
    archive = SessionArchive(tmp_path / "state.db", background_checkpoints=False)
    for sid, when, texts in sessions:
        archive.open_session(Session(id=sid, started_at=when))
        archive.append_messages(sid, [Message("user", t, timestamp=when + k)
                                      for k, t in enumerate(texts)])
    g = GuardedEmbedder(Topics())
    reindex(archive, g)
    index = VectorIndex(archive)
    index.refresh(g.dimension)
    return archive, g, index


def ranked(archive: SessionArchive, query: str, g: GuardedEmbedder | None,
           index: VectorIndex | None, weights: Policy | None = None) -> list[str]:
    found = hybrid_candidates(archive, query, g, index, weights=weights).found
    ids = [c.id for c in found]
    if not ids:
        return []
    rows = dict(archive.db.read(
        "SELECT m.id, s.id FROM messages AS m JOIN sessions AS s ON s.num = m.session "
        f"WHERE m.id IN ({','.join('?' * len(ids))})", tuple(ids)))
    return list(dict.fromkeys(rows[i] for i in ids))


def newer(archive: SessionArchive, query: str, g: GuardedEmbedder, index: VectorIndex,
          weights: Policy | None = None) -> dict[str, str]:
    """session -> the later session named beside it as a possible update."""
    result = hybrid_candidates(archive, query, g, index, weights=weights)
    sid = dict(archive.db.read("SELECT chain, id FROM sessions"))
    return {sid[a]: sid[b] for a, (b, _message) in result.newer.items()}


# the earlier statement is the closer match (cosine ~1); the later one mixes in another topic
# (cosine ~0.89 with the question: relevant, but below the earlier one)
EARLY = ("early", T0, ["I write all my code in helix"])


def late(days: float, text: str = "gave up on helix for the dog's sake, neovim now",
         ) -> tuple[str, float, list[str]]:
    return ("late", T0 + days * DAY, [text])


def test_a_later_statement_of_a_change_supersedes_for_a_present_state_question(
        tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [EARLY, late(30)])
    try:
        # named beside the earlier one, which keeps its place (the closer match)
        assert ranked(archive, "Which editor do I use?", g, index)[:2] == ["early", "late"]
        assert newer(archive, "Which editor do I use?", g, index) == {"early": "late"}
        off = replace(Policy(), update_window=0)
        assert newer(archive, "Which editor do I use?", g, index, off) == {}
    finally:
        archive.close()


def test_no_supersession_within_days_of_the_earlier_statement(tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [EARLY, late(3)])
    try:
        assert newer(archive, "Which editor do I use?", g, index) == {}
        sooner = replace(Policy(), update_days=2.0)
        assert newer(archive, "Which editor do I use?", g, index, sooner) == {"early": "late"}
    finally:
        archive.close()


def test_no_supersession_by_a_conversation_that_states_no_change(tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [
        EARLY, late(30, "helix tips for the dog's sake, neovim keys")])
    try:
        assert newer(archive, "Which editor do I use?", g, index) == {}
    finally:
        archive.close()


# no change word in either: the later one names the same thing (Helix) with another count
VALUED = ("early", T0, ["I write all my code in Helix with three plugins"])


def test_a_new_value_of_the_same_thing_supersedes_without_a_change_word(
        tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [
        VALUED, late(30, "Only two plugins in Helix, the dog sleeps on the desk")])
    try:
        assert newer(archive, "Which editor do I use?", g, index) == {"early": "late"}
        # switched off, only a change word would do
        off = replace(Policy(), differs=False)
        assert newer(archive, "Which editor do I use?", g, index, off) == {}
    finally:
        archive.close()


@pytest.mark.parametrize("text", [
    "Two dogs and a Whippet, and helix on the desk",  # new values, none the earlier one named
    "Is Helix good with two plugins for the dog?",  # a question states no value
    "helix with plugins, the dog sleeps on the desk"])  # no value at all
def test_no_supersession_without_a_new_value_of_something_named_before(
        tmp_path: Path, text: str) -> None:
    archive, g, index = build(tmp_path, [VALUED, late(30, text)])
    try:
        assert newer(archive, "Which editor do I use?", g, index) == {}
    finally:
        archive.close()


def test_the_change_word_path_switched_off_leaves_only_new_values(tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [EARLY, late(30)])
    try:
        assert newer(archive, "Which editor do I use?", g, index) == {"early": "late"}
        off = replace(Policy(), change_word=False)  # "gave up on helix ..., neovim now"
        assert newer(archive, "Which editor do I use?", g, index, off) == {}
    finally:
        archive.close()


def test_no_supersession_for_a_question_about_an_event_or_the_earlier_state(
        tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [EARLY, late(30)])
    try:
        for question in ("Which editor did I use?", "Which editor was I on first?",
                         "Suggest an editor", "editor"):
            assert ranked(archive, question, g, index)[:2] == ["early", "late"], question
            assert newer(archive, question, g, index) == {}, question
    finally:
        archive.close()


def test_no_supersession_by_a_conversation_that_does_not_answer_the_question(
        tmp_path: Path) -> None:
    # the later conversation is mostly about the dog: cosine ~0.35 with the question, a third of
    # the earlier one's; on the same topic only if the topic bar is lowered, to isolate the rule
    archive, g, index = build(tmp_path, [
        EARLY, late(30, "the dog and the whippet vet now, helix")])
    try:
        loose = replace(Policy(), same_topic=0.0)
        assert newer(archive, "Which editor do I use?", g, index, loose) == {}
        assert newer(archive, "Which editor do I use?", g, index,
                     replace(loose, update_relevance=0.0)) == {"early": "late"}
    finally:
        archive.close()


def test_no_supersession_across_topics(tmp_path: Path) -> None:
    archive, g, index = build(tmp_path, [
        EARLY, ("late", T0 + 30 * DAY, ["the landlord raised the rent, we moved flat now"]),
        ("later", T0 + 60 * DAY, ["helix, and the landlord and the rent and the flat, switched"])])
    try:
        # "later" (cosine ~0.32 with the editor question and with the earlier statement) is
        # relevant enough at this bar, but not on the earlier one's topic (cosine < same_topic)
        relevant = replace(Policy(), update_relevance=0.3)
        assert "later" not in newer(archive, "Which editor do I use?", g, index,
                                    relevant).values()
        assert newer(archive, "Which editor do I use?", g, index,
                     replace(relevant, same_topic=0.3)).get("early") == "later"
    finally:
        archive.close()


def test_a_newer_conversation_gets_no_recency_bonus(tmp_path: Path) -> None:
    # no shared word with the question; the older text is a touch closer in meaning (~1.0 vs
    # ~0.98): a recency prior (0.06 before) put the newer one first
    archive, g, index = build(tmp_path, [
        ("older", T0, ["whippet flat"]),
        ("newer", T0 + 200 * DAY, ["whippet whippet whippet flat flat"])])
    try:
        assert ranked(archive, "pet landlord", g, index)[:2] == ["older", "newer"]
    finally:
        archive.close()


def test_a_message_with_every_word_of_the_query_outranks_a_slightly_closer_meaning(
        tmp_path: Path) -> None:
    # "both" holds both words, its cosine ~0.95; "meaning" holds neither, its cosine ~1.0: the
    # word weight (0.2 x BM25 / best BM25) carries the exact match over the small gap
    archive, g, index = build(tmp_path, [
        ("both", T0, ["helix lisbon neovim"]), ("meaning", T0 + DAY, ["vim flight"])])
    try:
        assert ranked(archive, "helix lisbon", g, index)[:2] == ["both", "meaning"]
        # the word share (every question word, share 1.0) carries it too ...
        no_bm25 = replace(Policy(), words=0.0)
        assert ranked(archive, "helix lisbon", g, index, no_bm25)[:2] == ["both", "meaning"]
        # ... without either, the closer meaning is first
        off = replace(Policy(), words=0.0, share=0.0)
        assert ranked(archive, "helix lisbon", g, index, off)[:2] == ["meaning", "both"]
    finally:
        archive.close()


def test_an_any_word_fallback_match_gets_no_word_weight(tmp_path: Path) -> None:
    # no message holds "spaceship": the word search falls back to any word and finds "both" by
    # "helix" alone; that is no evidence, so the closer meaning stays first (with the word
    # weight, ~0.89 + 0.2 would pass ~1.0)
    archive, g, index = build(tmp_path, [
        ("both", T0, ["helix lisbon neovim"]), ("meaning", T0 + DAY, ["vim"])])
    try:
        result = hybrid_candidates(archive, "helix spaceship", g, index)
        assert result.matched == "any"
        assert ranked(archive, "helix spaceship", g, index)[:2] == ["meaning", "both"]
        # the same gap with every word matched: the word weight decides
        assert ranked(archive, "helix neovim", g, index)[:2] == ["both", "meaning"]
    finally:
        archive.close()


def test_without_an_embedder_the_ranking_is_exactly_the_word_ranking(tmp_path: Path) -> None:
    archive, _g, _index = build(tmp_path, [
        EARLY, late(30), ("trip", T0 + DAY, ["flight to lisbon with the dog, helix on the laptop"]),
        ("rent", T0 + 2 * DAY, ["the landlord wants more rent for the flat"])])
    try:
        for query in ("helix", "dog helix", "lisbon OR rent", "which editor do I use now?"):
            plan = plan_query(archive, query)
            lexical, _matched = run_plan(archive, plan, limit=2000)
            result = hybrid_candidates(archive, query, None, None)
            assert [c.id for c in result.found] == [c.id for c in lexical], query
            assert result.problem == "semantic search is off"
    finally:
        archive.close()


def test_only_the_fused_word_matches_are_ranked_unless_meaning_fails(tmp_path: Path) -> None:
    """With vectors, the word search keeps only what the fusion reads (Policy.lexical); when the
    query's embedding then fails, the result is the word ranking with every candidate asked for."""
    many = [(f"s{i}", T0 + i * DAY, [f"the helix config note number {i}"]) for i in range(24)]
    archive, g, index = build(tmp_path, many)
    policy = replace(Policy(), lexical=4)
    try:
        fused = hybrid_candidates(archive, "helix config", g, index, weights=policy)
        assert fused.problem is None
        assert sum("words" in v for v in fused.via.values()) == 4  # the rest came by meaning
        failing = GuardedEmbedder(Topics())
        calls = {"n": 0}

        def fail_after_indexing(texts: object) -> list[list[float]]:
            calls["n"] += 1
            raise RuntimeError("the model went away")

        failing.embedder.embed = fail_after_indexing  # type: ignore[method-assign]
        alone = hybrid_candidates(archive, "helix config", failing, index, weights=policy)
        lexical, _matched = run_plan(archive, plan_query(archive, "helix config"), limit=2000)
        assert calls["n"] >= 1 and alone.problem and "went away" in alone.problem
        assert [c.id for c in alone.found] == [c.id for c in lexical] and len(lexical) == 24
    finally:
        archive.close()


@pytest.mark.parametrize(("query", "current"), [
    ("Who is my manager?", True), ("What car do we drive?", True),
    ("When will the kitchen be finished?", True), ("How do I get to work these days?", True),
    ("What's my rent?", True), ("What runs our builds at the moment?", True),
    ("What did I buy?", False), ("What broke in the house?", False),
    ("Who was my manager?", False), ("How long did they first say it would take?", False),
    ("What is the editor I used before?", False),
    ("Suggest a book", False), ("whippet shelter", False)])
def test_which_questions_ask_about_the_present_state(query: str, current: bool) -> None:
    assert asks_current(query) is current


@pytest.mark.parametrize(("text", "change"), [
    ("Daniel Osei is my manager now.", True), ("We settled on 1,380 a month instead.", True),
    ("Gave up on Helix after all.", True), ("I've gone back to taking the train.", True),
    ("Switched to the Saturday squad.", True), ("The Aeropress is retired.", True),
    ("We finished migrating our CI to GitHub Actions.", True),
    ("My manager is Priya Raman.", False), ("Is melatonin safe for jet lag?", False),
    ("Went bouldering with the kids.", False), ("Nowhere to park, know what I mean", False)])
def test_which_statements_state_a_change(text: str, change: bool) -> None:
    assert states_change(text) is change


@pytest.mark.parametrize(("text", "found"), [
    ("We got three hens, named Dolly, Shirley and Bassey.", {"three", "dolly", "shirley", "bassey"}),
    ("A fox took Shirley, so we're down to two birds.", {"shirley", "two"}),
    ("We settled on 1,380 a month instead.", {"1,380"}),
    ("Is melatonin safe for Jet lag after 2 flights?", set()),
    ("Moved to single sculls. I row on Saturday mornings", {"single", "saturday"}),
    ("I think so: I'm fine", set()),
    ("Book club is at Sarah\u2019s now, and Sarah's sister comes", {"sarah's"})])
def test_which_values_a_statement_gives(text: str, found: set[str]) -> None:
    assert values(text) == found


def test_the_real_model_names_the_current_statement_beside_the_outdated_one(tmp_path: Path) -> None:
    minilm = pytest.importorskip("hermes_core.plugins.embedders.minilm")
    if minilm.MiniLMEmbedder.unavailable():
        pytest.skip(minilm.MiniLMEmbedder.unavailable())
    archive = SessionArchive(tmp_path / "state.db", background_checkpoints=False)
    try:
        for sid, when, text in [
                ("old", T0, "My manager is Priya Raman; she runs the payments platform group."),
                ("cat", T0 + 10 * DAY, "My sister's cat needs a vet near Morningside."),
                ("new", T0 + 200 * DAY, "Reorg news: Priya moved to the risk team and Daniel "
                                        "Osei is my manager now.")]:
            archive.open_session(Session(id=sid, started_at=when))
            archive.append_messages(sid, [Message("user", text, timestamp=when)])
        g = GuardedEmbedder(minilm.MiniLMEmbedder(minilm.MiniLMConfig()), timeout=120)
        reindex(archive, g)
        index = VectorIndex(archive)
        index.refresh(g.dimension)
        # by relevance the outdated statement leads; the current one is named beside it
        assert ranked(archive, "Who is my manager?", g, index)[:2] == ["old", "new"]
        assert newer(archive, "Who is my manager?", g, index) == {"old": "new"}
        # a question about the past gets no such note
        assert newer(archive, "Who was my manager at the start?", g, index) == {}
        g.close()
    finally:
        archive.close()


def test_session_search_shows_the_later_statement_beside_the_earlier_one(tmp_path: Path) -> None:
    from hermes_core.plugins.memory.session_archive.tool import Semantic, session_search

    archive, g, index = build(tmp_path, [EARLY, late(30)])
    try:
        out = session_search(archive, "Which editor do I use?",
                             semantic=Semantic(embedder=g, index=index))
        first = out["results"][0]
        assert first["session_id"] == "early"
        assert first["newer"]["session_id"] == "late"
        assert first["newer"]["snippet"] == "gave up on helix for the dog's sake, neovim now"
        # the later one is still listed in its own place; nothing is dropped or reordered
        assert [r["session_id"] for r in out["results"]][:2] == ["early", "late"]
        assert "newer" not in out["results"][1]
        past = session_search(archive, "Which editor did I use?",
                              semantic=Semantic(embedder=g, index=index))
        assert all("newer" not in r for r in past["results"])
    finally:
        archive.close()


def test_the_old_name_of_the_ranking_policy_warns_and_still_works():
    from hermes_core.plugins.memory.session_archive import hybrid

    with pytest.warns(DeprecationWarning, match="renamed Policy"):
        old = hybrid.Weights
    assert old is Policy
