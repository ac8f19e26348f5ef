"""The lexical search's odd inputs (issue 19 item 4, issue 17 item 10), each against a real
archive: no cap that loses older sessions, NOT, lone surrogates, glued words, -word, operators
alone, prefixes past the Porter stem, ``word=1``/``word<br>``, deep parentheses, and the search
tools' own echoes left out. Plus a bounded fuzz: any string gives hits or a clear QueryError."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from archive_support import make_archive
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_core.plugins.memory.session_archive import QueryError, SessionArchive
from hermes_core.plugins.memory.session_archive.search import search_messages
from hermes_core.plugins.memory.session_archive.tool import session_search
from hermes_core.types import Message, ToolCall

FACTS = {
    "s-deploy": "the deployment of the billing service moved to friday",
    "s-compact": "compaction kept the last twenty turns verbatim",
    "s-fight": "fighting with the flaky scheduler took all morning",
    "s-url": "the guide is at https://docs.example.org/setup/install.html for everyone",
    "s-path": "edit /srv/app/config/settings.yaml and restart the worker",
    "s-kv": "we set retries=5 in the http client",
    "s-html": "first line<br>second line mentions quokka",
    "s-cats": "cats and dogs living together in the apartment",
    "s-cats2": "cats sleeping on the windowsill all day",
    "s-and": "this sentence and that sentence",
    "s-or": "either this or that, not both",
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionArchive]:
    a = SessionArchive(Path(tmp_path_factory.mktemp("r")) / "state.db",
                       background_checkpoints=False)
    for sid, text in FACTS.items():
        a.append_messages(sid, [Message(role="user", content=text),
                                Message(role="assistant", content="noted")])
    # an earlier session_search: the call holds the query, the result echoes old messages
    a.append_messages("s-echo", [
        Message(role="user", content="what about the quokka?"),
        Message(role="assistant", content="", tool_calls=[
            ToolCall(id="t1", name="session_search", arguments={"query": "zebrafish habitat"})]),
        Message(role="tool", tool_name="session_search", tool_call_id="t1",
                content=json.dumps({"results": [{"snippet": "zebrafish habitat notes"}]})),
    ])
    yield a
    a.close()


def sessions(archive: SessionArchive, q: str) -> list[str]:
    return [h.session_id for h in search_messages(archive, q, limit=20).hits]


def test_and_not_excludes(archive: SessionArchive) -> None:
    assert set(sessions(archive, "cats")) == {"s-cats", "s-cats2"}
    assert sessions(archive, "cats AND NOT dogs") == ["s-cats2"]
    assert sessions(archive, "cats NOT dogs") == ["s-cats2"]


def test_leading_minus_excludes(archive: SessionArchive) -> None:
    assert sessions(archive, "cats -dogs") == ["s-cats2"]
    with pytest.raises(QueryError, match="only excludes"):
        search_messages(archive, "-dogs")


@pytest.mark.parametrize("q", ["quokka\ud800", "\udfffquokka", "quo\udc00kka quokka"])
def test_lone_surrogates_are_searched_not_raised(archive: SessionArchive, q: str) -> None:
    assert "s-html" in sessions(archive, q)
    out = session_search(archive, q)  # the tool path (titles are matched too)
    assert out["count"] >= 1


@pytest.mark.parametrize("q,sid", [
    ("quokka,scheduler", "s-html"), ("quokka;scheduler", "s-fight"),
    ("quokka+scheduler", "s-html"),
    ("https://docs.example.org/setup/nothing.html", "s-url"),
    ("/srv/app/config/other.yaml", "s-path"),
    ("retries=1", "s-kv"), ("quokka<br>", "s-html"), ("quokka=1", "s-html"),
])
def test_glued_words_fall_back_instead_of_silently_empty(
    archive: SessionArchive, q: str, sid: str
) -> None:
    assert sid in sessions(archive, q)


def test_glued_words_still_prefer_the_exact_phrase(archive: SessionArchive) -> None:
    result = search_messages(archive, "/srv/app/config/settings.yaml")
    assert result.matched == "all" and result.hits[0].session_id == "s-path"


@pytest.mark.parametrize("q", ["AND", "OR", "NOT", "AND AND", "AND OR NOT"])
def test_an_operator_alone_is_a_word(archive: SessionArchive, q: str) -> None:
    found = sessions(archive, q)  # searched as the words "and", "or", "not"
    assert found and set(found) <= {"s-and", "s-cats", "s-or", "s-path"}


def test_dangling_operators_are_dropped(archive: SessionArchive) -> None:
    assert "s-html" in sessions(archive, "AND AND quokka")
    assert "s-html" in sessions(archive, "quokka OR")


@pytest.mark.parametrize("q,sid", [
    ("deploym*", "s-deploy"), ("compacti*", "s-compact"), ("fighti*", "s-fight"),
    ("deployme*", "s-deploy"), ("schedul*", "s-fight"),
])
def test_prefixes_past_the_porter_stem(archive: SessionArchive, q: str, sid: str) -> None:
    assert sid in sessions(archive, q)


def test_deep_parentheses_are_a_clear_error_not_a_recursion(archive: SessionArchive) -> None:
    for n in (9, 96, 247, 900):
        with pytest.raises(QueryError, match="nests parentheses"):
            search_messages(archive, "(" * n + "cats OR dogs" + ")" * n)
    assert sessions(archive, "((cats OR quokka))")  # shallow nesting works
    assert "s-html" in sessions(archive, "(" * 500 + "quokka")  # no operators: punctuation


def test_many_nots_in_a_row_are_valid(archive: SessionArchive) -> None:
    q = "cats " + " ".join(f"NOT w{i}" for i in range(30))
    assert set(sessions(archive, q)) == {"s-cats", "s-cats2"}


def test_search_tool_echoes_are_not_searched(archive: SessionArchive) -> None:
    # only the earlier search's call and result hold these words
    assert sessions(archive, "zebrafish habitat") == []
    assert "s-echo" not in sessions(archive, "zebrafish")
    # the user's own words in that session are found
    assert "s-echo" in sessions(archive, "what about the quokka")


def test_an_old_best_match_under_many_newer_matches_is_found_first(
        tmp_path: Path, storage_url: str | None) -> None:
    """Every match is ranked: the oldest message, the best match, comes first however many newer
    messages match (the archive used to rank a sample of a query with more matches than the
    candidate budget - the newest few of each eighth of history - and missed it), for a word
    and for the any-word fallback whose words are all common."""
    with make_archive(tmp_path, storage_url) as a:
        a.append_messages("old", [Message(role="user", content="ferry ferry timetable")])
        a.append_messages("new", [
            Message(role="user", content=f"a note {i} on the {('ferry', 'timetable')[i % 2]} "
                    "and the harbour crane weather")
            for i in range(600)])
        result = search_messages(a, "ferry", candidate_limit=50, limit=3)
        assert result.matched == "all" and result.hits[0].session_id == "old"
        # no message has all three words; each matches more than the budget
        result = search_messages(a, "ferry timetable lighthouse", candidate_limit=50, limit=3)
        assert result.matched == "any" and result.hits[0].session_id == "old"
        assert len(search_messages(a, "harbour", candidate_limit=50, limit=500).hits) == 50


def test_echoes_above_the_best_matches_do_not_hide_them(
        tmp_path: Path, storage_url: str | None) -> None:
    """search_messages ranks only a few more than it shows; when the search tools' own outputs
    take those places, it ranks further instead of showing fewer."""
    with make_archive(tmp_path, storage_url) as a:
        a.append_messages("real", [Message(role="user", content="a zebrafish tank, long " * 20)])
        a.append_messages("echo", [Message(role="tool", content="zebrafish zebrafish",
                                           tool_name="session_search") for _ in range(40)])
        hits = search_messages(a, "zebrafish", limit=2).hits
        assert [h.session_id for h in hits] == ["real"]


ODD = st.text(st.characters(codec="utf-16", categories=None), max_size=60) | st.lists(
    st.sampled_from(["AND", "OR", "NOT", "(", ")", '"', "-", "*", "quokka", "cats", "=1",
                     "<br>", ",", "+", "/", "\ud800", "\U0001f600", "deploym*"]),
    max_size=40).map(" ".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=ODD)
def test_fuzz_any_string_gives_hits_or_a_clear_message(archive: SessionArchive, q: str) -> None:
    try:
        search_messages(archive, q)
    except QueryError as exc:
        assert "bug" not in str(exc), str(exc)
