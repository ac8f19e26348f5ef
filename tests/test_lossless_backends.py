"""The lossless engine's archive on both backends: context.db in the home, and ``storage.url``.

The same engine behaviours as tests/test_lossless_engine.py, run once per backend (the
``storage_url`` fixture: SQLite, then a real PostgreSQL database), plus a side-by-side check that
both stores answer the same operations identically, and the PostgreSQL-only cases (two nodes,
NUL characters, a newer schema, an unreachable server).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from compressor_support import build_history, make_context

from hermes_core.compaction.markers import is_summary_message, split_summary
from hermes_core.compaction.repair import history_problems
from hermes_core.errors import ToolError
from hermes_core.plugins.context_engine.lossless import LosslessConfig, LosslessEngine, SpanStore
from hermes_core.types import Message, Session, SwitchReason, ToolCall, ToolContext


@pytest.fixture
def backend(storage_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    else:
        monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    return storage_url


def make(home: Path, **settings: object) -> LosslessEngine:
    return LosslessEngine(LosslessConfig(**settings), make_context(home, window=60_000))


def planted_history() -> list[Message]:
    history = build_history(60, seed=31)
    history += [
        Message("user", "Our staging password rotates every Tuesday; the bucket is named "
                        "quokka-archive-7"),
        Message("assistant", "Noted.", tool_calls=[
            ToolCall("p1", "terminal", {"command": "aws s3 ls"})]),
        Message("tool", "2024-01-01 quokka-archive-7", tool_call_id="p1", tool_name="terminal"),
        Message("assistant", "The bucket exists."),
    ]
    return history + build_history(80, seed=32)


def tools(engine: LosslessEngine) -> dict:
    return {t.name: t for t in engine.get_tools()}


def stored(engine: LosslessEngine, conversation: str) -> list[tuple[str, str]]:
    out = []
    for span in engine.store.spans(conversation):
        out += [(m.message.role, m.message.content)
                for m in engine.store.messages(span.id, 0, 10_000)]
    return out


def test_the_backend_in_effect(tmp_path: Path, backend: str | None) -> None:
    engine = make(tmp_path)
    assert type(engine.store).__name__ == ("PgSpanStore" if backend else "SpanStore")
    assert (tmp_path / "context.db").exists() is (backend is None)  # nothing written aside


def test_compaction_archives_the_middle_verbatim(tmp_path: Path, backend: str | None) -> None:
    engine = make(tmp_path)
    history = planted_history()
    out = engine.compact(history).messages
    assert history_problems(out) == []
    kept = {id(m) for m in out}
    merged = {split_summary(m.content)[1] for m in out if is_summary_message(m)}  # type: ignore[index]
    gone = [m for m in history if id(m) not in kept and m.content not in merged]
    assert [(m.role, m.content) for m in gone] == stored(engine, engine.conversation)


def test_search_then_expand_and_scoping(tmp_path: Path, backend: str | None) -> None:
    engine = make(tmp_path)
    alice, bob = Session("alice-1"), Session("bob-1")
    engine.on_session_switch(alice, None, SwitchReason.NEW)
    engine.compact(planted_history())
    engine.on_session_switch(bob, alice, SwitchReason.NEW)
    engine.compact(build_history(150, seed=34))
    search, expand = tools(engine)["context_search"], tools(engine)["context_expand"]
    found = json.loads(search.invoke({"query": "what was the bucket called? quokka"},
                                     ToolContext(session=alice)))
    hit = found["hits"][0]
    assert "quokka-archive-7" in hit["snippet"]
    page = json.loads(expand.invoke({"span_id": hit["span_id"], "start": hit["seq"], "count": 3},
                                    ToolContext(session=alice)))
    assert page["messages"][0]["content"].endswith("the bucket is named quokka-archive-7")
    assert page["messages"][1]["tool_calls"] == [
        {"name": "terminal", "arguments": {"command": "aws s3 ls"}}]
    assert json.loads(search.invoke({"query": "quokka"}, ToolContext(session=bob)))["hits"] == []
    with pytest.raises(ToolError, match="not an archived span of this conversation"):
        expand.invoke({"span_id": hit["span_id"]}, ToolContext(session=bob))
    child = Session("alice-2", parent_session_id="alice-1")
    engine.on_session_switch(child, alice, SwitchReason.COMPRESSION)
    assert json.loads(search.invoke({"query": "quokka"}, ToolContext(session=child)))["hits"]
    for query in ("what is it?", "friend's bucket", "$5 coupon", "50%", "a/b", 'quokka" OR (',
                  "*", "&|!:()<->"):
        json.loads(search.invoke({"query": query}, ToolContext(session=alice)))
    none = json.loads(search.invoke({"query": "zebra unicorn?!"}, ToolContext(session=alice)))
    assert none["hits"] == []


def test_archive_survives_a_new_engine_and_forget_removes_it(
    tmp_path: Path, backend: str | None
) -> None:
    session = Session("s-1")
    engine = make(tmp_path)
    engine.bind_session(session)
    engine.compact(planted_history())
    engine.shutdown()
    again = make(tmp_path)
    search = tools(again)["context_search"]
    assert json.loads(search.invoke({"query": "quokka"}, ToolContext(session=session)))["hits"]
    dry = again.forget("QUOKKA-archive-7", "all", True)
    assert dry.matched == 2 and dry.deleted == 0
    done = again.forget("quokka-archive-7", "all", False)
    assert done.deleted == 2
    assert json.loads(search.invoke({"query": "quokka"}, ToolContext(session=session)))[
        "hits"] == []


def test_both_stores_answer_the_same(tmp_path: Path, pg_url: str) -> None:
    """One script of writes and reads against SQLite and PostgreSQL: identical answers."""
    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.storage import parse_storage_url

    stores = [SpanStore(tmp_path / "context.db"), PgSpanStore(parse_storage_url(pg_url))]
    answers = []
    first, second = planted_history(), build_history(20, seed=5)
    for store in stores:
        store.link("c1", "c1")
        store.link("c2", "c1")
        store.add_span("c1", first, "digest one: quokka bucket")
        store.add_span("c1", second, "digest two")
        store.add_span("other", [Message("user", "quokka elsewhere")], "x")
        hits = [(h.span_id, h.seq, h.role, h.snippet)
                for q in ("quokka archive", "bucket Tuesday", "nothing-like-this quokka", "é")
                for h in store.search("c1", q, limit=10_000)]
        answers.append({
            "root": store.root_of("c2"),
            "spans": [(s.id, s.conversation, s.n_messages, s.digest) for s in store.spans("c1")],
            "count": store.count_spans("c1"),
            "messages": [(m.seq, m.message) for m in store.messages(1, 0, 10_000)],
            # the same matches (the order within equal ranks may differ: bm25 / ts_rank_cd)
            "hit_keys": sorted(h[:3] for h in hits),
            "snippets": sorted(h[3] for h in hits),
            "forget": store.forget("rotates every", dry_run=False),
        })
    assert answers[0] == answers[1]


def test_postgresql_two_nodes_share_spans_and_nul_text_survives(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", pg_url)
    session = Session("s-1")
    node_a, node_b = make(tmp_path / "a"), make(tmp_path / "b")
    node_a.bind_session(session)
    history = planted_history()
    history[70] = Message("user", "binary \x00 blob and \U0010fffe marker with quokka")
    node_a.compact(history)
    node_b.bind_session(session)
    hits = json.loads(tools(node_b)["context_search"].invoke(
        {"query": "binary blob marker"}, ToolContext(session=session)))["hits"]
    assert hits
    page = node_b.store.messages(hits[0]["span_id"], hits[0]["seq"], 1)
    assert page[0].message.content == "binary \x00 blob and \U0010fffe marker with quokka"


def test_postgresql_bad_input(tmp_path: Path, pg_url: str) -> None:
    import psycopg

    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.storage import (
        StorageConnectError,
        StorageVersionError,
        close_pools,
        parse_storage_url,
    )

    url = parse_storage_url(pg_url)
    PgSpanStore(url).add_span("c", [Message("user", "hello")], "d")
    close_pools()
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("UPDATE hermes_schema SET version = 7 WHERE component = 'lossless'")
    with pytest.raises(StorageVersionError, match=r"lossless schema .* version 7"):
        PgSpanStore(url)
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT count(*) FROM lossless_span_messages").fetchone() == (1,)
    dead = parse_storage_url("postgresql://hermes:s3cret@127.0.0.1:1/hermes")
    with pytest.raises(StorageConnectError) as caught:
        PgSpanStore(dead)
    assert "s3cret" not in str(caught.value) and "hermes:***@127.0.0.1:1/hermes" in str(
        caught.value)


def test_migrating_two_homes_renumbers_a_taken_span_id_and_keeps_everything(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from hermes_core.cli import cli
    from hermes_core.plugins.context_engine.lossless.pg_store import PgSpanStore
    from hermes_core.plugins.context_engine.lossless.transfer import dump
    from hermes_core.storage import parse_storage_url

    monkeypatch.delenv("HERMES_CORE_STORAGE_URL", raising=False)
    reports = []
    for name, seed in (("a", 31), ("b", 41)):
        home = tmp_path / name
        engine = make(home)
        engine.bind_session(Session(f"{name}-1"))
        engine.compact(build_history(150, seed=seed))
        engine.shutdown()
        result = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url, "--json"],
                                    env={"HERMES_CORE_HOME": str(home),
                                         "HERMES_CORE_STORAGE_URL": ""})
        assert result.exit_code == 0, result.output
        reports.append(json.loads(result.output))
    assert [(r["copied"]["lossless_spans"], r["plugins"]["lossless"]["detail"]["renumbered"])
            for r in reports] == [(1, 0), (1, 1)]
    spans = dump(PgSpanStore(parse_storage_url(pg_url)))["spans"]
    assert {conv: [s.id for s, _ in items] for conv, items in spans.items()} == {
        "a-1": [1], "b-1": [2]}
    with_b = SpanStore(tmp_path / "b" / "context.db")
    assert [m.message for m in with_b.messages(1, 0, 10_000)] == spans["b-1"][0][1]
    # the database hands out the next id after the copied ones
    monkeypatch.setenv("HERMES_CORE_STORAGE_URL", pg_url)
    engine = make(tmp_path / "c")
    assert engine.store.add_span("c-1", [Message("user", "x")], "d").id == 3


@pytest.mark.parametrize(("argument", "subject"), [
    ("C:\\Users\\maria\\payroll.xlsx", "users\\maria\\payroll"),  # doubled in the JSON
    ("To:\nMaria Costa", "to: maria costa"),  # a line break: whitespace, as forget matches
    ('the "Maria" file', '"maria" file'),  # quotes, escaped in the JSON
])
def test_forget_matches_archived_tool_call_arguments_as_written(
    tmp_path: Path, backend: str | None, argument: str, subject: str
) -> None:
    """Archived tool calls are JSON; forget matches their arguments as the model wrote them
    (what the word index holds), not their JSON escapes."""
    store = make(tmp_path).store
    store.link("c1", "c1")
    store.add_span("c1", [Message("user", "open it"), Message("assistant", "", tool_calls=[
        ToolCall("t1", "read_file", {"path": argument})])], "a digest")
    hits, _digests = store.forget(subject, dry_run=False)
    assert len(hits) == 1
    assert [m.message.content for m in store.messages(1, 0, 10)] == ["open it"]


def test_a_compaction_after_a_forget_of_a_history_loaded_before_it_archives_none_of_it(
    tmp_path: Path, backend: str | None
) -> None:
    """A turn in flight when ``hermes-core forget`` lands still holds the subject in its live
    history; when that turn compacts (mid-turn, or before the server rebuilt the conversation),
    the engine archives the history after the forget. What it archives is forgotten again, as
    the session archive does with what such a turn writes (see storage.md)."""
    from hermes_core.storage.erasures import forget_noted, note_forget

    engine = make(tmp_path)
    session = Session("s-1")
    engine.on_session_switch(session, None, SwitchReason.NEW)  # the history is loaded
    note = note_forget("quokka-archive-7", "all", home=tmp_path, storage_url=backend)
    other = make(tmp_path)  # the forget command's engine: nothing archived yet
    other.forget("quokka-archive-7", "all", False)
    forget_noted(note, home=tmp_path, storage_url=backend)
    other.shutdown()
    engine.compact(planted_history(), session=session)  # the turn in flight compacts
    assert not [t for _r, t in stored(engine, "s-1") if "quokka-archive-7" in t]
    search = tools(engine)["context_search"]
    assert json.loads(search.invoke({"query": "quokka"}, ToolContext(session=session)))[
        "hits"] == []
    engine.shutdown()
