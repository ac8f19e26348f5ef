"""The query builder, property-tested against a real archive: any string is a valid query or a
clear QueryError; punctuation never empties a result; stemming; CJK of every length."""

from __future__ import annotations

import string
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hermes_core.plugins.memory.session_archive import QueryError, SessionArchive
from hermes_core.plugins.memory.session_archive.query import MAX_QUERY_CHARS, build_query
from hermes_core.plugins.memory.session_archive.search import search_messages
from hermes_core.types import Message, ToolCall

WORDS = ["nginx", "timeout", "kubernetes", "birthday", "friend", "coupon", "deploy", "backup",
         "postgres", "migration", "latency", "quartz", "zephyr", "walrus", "mango", "cobalt"]
CJK_TEXT = "今天我们部署了新的数据库服务器然后检查日志"
KANA = "サーバーのメモリを確認しました"
HANGUL = "서버 데이터 오류를 확인했습니다"

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionArchive]:
    path = Path(tmp_path_factory.mktemp("q")) / "state.db"
    a = SessionArchive(path, background_checkpoints=False)
    msgs = [Message(role="user", content=f"the {w} issue we solved on tuesday") for w in WORDS]
    msgs += [
        Message(role="user", content="My friend's birthday is in May; the $5 coupon is 50% off"),
        Message(role="assistant", content="We solved the nginx timeout by raising proxy_read"),
        Message(role="assistant", content="", tool_calls=[
            ToolCall(id="toolu_1", name="read_file", arguments={"path": "/etc/chat-send.conf"})]),
        Message(role="user", content="release P2.2 of my-app.config.ts is out"),
        Message(role="user", content=CJK_TEXT),
        Message(role="user", content=KANA),
        Message(role="user", content=HANGUL),
        Message(role="user", content="mixed text: docker 容器 集群 restart"),
    ]
    a.append_messages("s-query", msgs)
    yield a
    a.close()


def run(archive: SessionArchive, q: str) -> list[str]:
    return [h.snippet for h in search_messages(archive, q, limit=50).hits]


# ------------------------------------------------------------------------------ any string


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
@example('"')
@example('"unbalanced phrase')
@example("NOT")
@example("a AND")
@example("(((")
@example(")))nginx(((")
@example("col:nginx")
@example("nginx*")
@example("*")
@example("NEAR(a b)")
@example("^nginx")
@example("\x00nginx\x00")
@example("nginx\ud800")
@example("-nginx")
@example("")
def test_any_string_is_a_query_or_a_clear_error(archive: SessionArchive, text: str) -> None:
    try:
        result = search_messages(archive, text, limit=5)
    except QueryError as exc:
        assert str(exc)  # a message saying what to do
        return
    assert result.matched in ("all", "any", "expression")


PIECES = ["nginx", "timeout", "AND", "OR", "NOT", "(", ")", '"', "*", "?", "-", ".", ":", "'s",
          "部署", "部", "数据库服务器", "データ", "서버", "$", "%", "/", "NEAR", "^", "+", "{", "}",
          "\u00e9t\u00e9", "\u0301", "\U0001f600", " ", ",", "nginx*", "ab*"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_operator_and_cjk_soup_is_a_query_or_a_clear_error(
    archive: SessionArchive, text: str
) -> None:
    try:
        search_messages(archive, text, limit=3)
    except QueryError as exc:
        assert "query" in str(exc)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
    seps=st.lists(st.sampled_from([" ", ", ", "? ", "! ", " / ", "; ", " - ", "... ", " & ",
                                   " $", "% ", " @", "'s ", ": "]), min_size=3, max_size=3),
    tail=st.sampled_from(["", "?", "??", "!", ".", ",", "'", '"', "…", "?!"]),
    head=st.sampled_from(["", "¿", "(", "'", "...", "@", "#", "*"]),
)
def test_punctuation_never_empties_a_result(
    archive: SessionArchive, words: list[str], seps: list[str], tail: str, head: str
) -> None:
    query = head + "".join(w + seps[i] for i, w in enumerate(words)).rstrip() + tail
    hits = run(archive, query)
    assert hits, f"{query!r} found nothing"
    assert any(words[0] in h for h in hits)


@pytest.mark.parametrize("query", [
    "what is it?", "friend's birthday", "I'm", "$5 coupon", "50%", "costs, birthday", "a/b",
    "nginx?", "How did we fix the nginx timeout?", "what did we do about the coupon, again?",
])
def test_hermes_silent_empty_inputs_now_find_or_explain(archive: SessionArchive, query: str) -> None:
    plan = build_query(query)
    assert plan.strict or plan.cjk
    result = search_messages(archive, query)
    if any(w in query for w in ("birthday", "coupon", "nginx", "50%", "$5")):
        assert result.hits, query


def test_a_question_in_plain_language_falls_back_to_ranked_or(archive: SessionArchive) -> None:
    result = search_messages(archive, "How did we ever fix that nginx timeout with the proxy?")
    assert result.matched == "any"
    assert "nginx timeout" in result.hits[0].snippet


def test_strict_and_is_tried_first(archive: SessionArchive) -> None:
    result = search_messages(archive, "nginx solved")
    assert result.matched == "all"
    assert all("nginx" in h.snippet for h in result.hits)


def test_stemming_solving_finds_solved(archive: SessionArchive) -> None:
    assert any("solved" in s for s in run(archive, "solving"))
    assert any("birthday" in s for s in run(archive, "friends birthdays"))


def test_phrases_hyphens_dots_and_tool_arguments(archive: SessionArchive) -> None:
    assert any("P2.2" in s for s in run(archive, "P2.2"))
    assert any("my-app.config.ts" in s for s in run(archive, "my-app.config.ts"))
    assert any("chat-send" in s for s in run(archive, "chat-send"))  # a tool-call argument
    assert any("read_file" in s for s in run(archive, "read_file"))  # a tool name
    assert run(archive, '"nginx timeout"')
    assert not run(archive, '"timeout nginx"')  # a phrase keeps its order
    assert not run(archive, "toolu_1")  # tool-call ids are not indexed


def test_operators_and_groups_are_honoured(archive: SessionArchive) -> None:
    assert search_messages(archive, "nginx NOT proxy_read").matched == "expression"
    both = {h.message_id for h in search_messages(archive, "nginx OR walrus").hits}
    assert len(both) >= 3
    grouped = search_messages(archive, "(walrus OR mango) solved")
    assert {h.snippet.split()[1] for h in grouped.hits} == {"walrus", "mango"}
    assert search_messages(archive, "nginx AND").hits  # a dangling operator is dropped


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_cjk_queries_of_every_length(archive: SessionArchive, n: int) -> None:
    for start in range(0, len(CJK_TEXT) - n, 3):
        q = CJK_TEXT[start : start + n]
        assert any(CJK_TEXT in s for s in run(archive, q)), q


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([CJK_TEXT, KANA, "서버", "데이터", "오류를", "확인했습니다"]), st.data())
def test_cjk_substrings_are_found(archive: SessionArchive, text: str, data: st.DataObject) -> None:
    core = text.replace(" ", "")
    n = data.draw(st.integers(1, min(6, len(core))))
    i = data.draw(st.integers(0, len(core) - n))
    q = core[i : i + n]
    if " " in text and q not in text:
        return  # spans a Hangul word break
    assert run(archive, q), q


def test_cjk_and_words_together(archive: SessionArchive) -> None:
    assert any("docker" in s for s in run(archive, "docker 容器"))
    assert any("docker" in s for s in run(archive, "容器集群 restart"))
    # no message has both: the OR fallback finds each
    result = search_messages(archive, "容器 walrus")
    assert result.matched == "any" and len(result.hits) >= 2


def test_the_or_fallback_spans_both_cjk_indexes(archive: SessionArchive) -> None:
    result = search_messages(archive, "数据库服务器 猫")  # 3+ characters, and 1 that is nowhere
    assert result.matched == "any" and CJK_TEXT in result.hits[0].snippet
    result = search_messages(archive, "猫狗鸟 容器")
    assert result.matched == "any" and "容器" in result.hits[0].snippet


def test_a_cjk_query_that_matches_nothing_is_empty(archive: SessionArchive) -> None:
    assert run(archive, "猫") == []
    assert run(archive, "猫狗") == []
    assert run(archive, "猫狗鸟") == []


@pytest.mark.parametrize("query", ["???", "!!! ...", "--", "*", "()", '""', "   ", "\x00\x01"])
def test_nothing_to_search_is_a_clear_error(archive: SessionArchive, query: str) -> None:
    with pytest.raises(QueryError, match=r"nothing to search for|no letters or digits"):
        search_messages(archive, query)


def test_a_100kb_query_is_a_clear_error(archive: SessionArchive) -> None:
    with pytest.raises(QueryError, match="limit is"):
        search_messages(archive, "nginx " * 20_000)
    assert len("x" * MAX_QUERY_CHARS) == MAX_QUERY_CHARS
    with pytest.raises(QueryError, match="search terms"):
        search_messages(archive, " ".join(string.ascii_lowercase[i % 26] * 3 + str(i)
                                          for i in range(100)))
