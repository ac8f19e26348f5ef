"""Derived memory (session_archive.derive): facts read from settled turns by the auxiliary model.

The model is the only fake part: a loopback Messages API server (hermes_core.testing) whose
answers come from a scripted function reading the prompt, reached through the real anthropic
client the configuration selects. The archive is a real SQLite file or a real PostgreSQL
database (both backends for the mechanics), the lane the real host's background lane.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from derive_support import (
    TURN_LINE,
    config_text,
    make_host,
    prompt_of,
    provider_of,
    scripted,
    search,
    settle,
    start,
    turn,
)

import hermes_core.plugins.llm.anthropic as anthropic_plugin
import hermes_core.plugins.memory.session_archive as plugin
from hermes_core.config import parse_config_text
from hermes_core.errors import ConfigError
from hermes_core.host import PluginHost
from hermes_core.plugins.memory.session_archive.derive import parse_facts
from hermes_core.plugins.memory.session_archive.facts import (
    Turn,
    derivation_state,
    list_facts,
)
from hermes_core.testing.messages_api import Failure, MessagesAPIServer, Reply
from hermes_core.types import Message, Session


@pytest.fixture
def api() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(scripted) as server:
        yield server


# ----------------------------------------------------------------------------- mechanics


def test_facts_are_written_linked_superseded_searched_and_forgotten(
        tmp_path: Path, api: MessagesAPIServer, storage_url: str | None) -> None:
    host = make_host(tmp_path, api, storage_url)
    provider = provider_of(host)
    s1 = start(host, "a1", "alice")
    turn(host, s1, "Our team is based in Porto these days")
    turn(host, s1, "Also I really can't handle spicy food")
    settle(host)
    s2 = start(host, "a2", "alice")
    turn(host, s2, "Big news: I moved the team to Lisbon last week")
    settle(host)
    archive = provider.archive
    facts = {f.text: f for f in list_facts(archive, user="alice")}
    assert set(facts) == {"The user's team is based in Porto", "The user cannot eat spicy food",
                          "The user moved the team to Lisbon"}
    porto, lisbon = facts["The user's team is based in Porto"], facts[
        "The user moved the team to Lisbon"]
    # linked to the message it was read from, dated, superseded by the update
    (source,) = porto.sources
    assert archive.messages_by_id([source])[source].content.startswith("Our team is based")
    assert porto.session_id == "a1" and lisbon.session_id == "a2"
    assert porto.superseded_by == lisbon.id and lisbon.current
    assert lisbon.to_dict()["valid_from"] == "2026-03-02"
    assert [f.text for f in list_facts(archive, user="alice", current_only=True)] == [
        "The user moved the team to Lisbon", "The user cannot eat spicy food"]
    # the archive's API the inspector (GET /api/facts) uses
    shown = archive.facts(all_users=True)
    assert len(shown) == 3 and {f["user"] for f in shown} == {"alice"}
    assert archive.facts(user="bob") == []
    state = derivation_state(archive)
    assert (state.backlog, state.error, state.turns) == (0, None, 3)
    assert state.tokens_per_turn() and state.tokens_per_turn() > 40
    # every model call went to the auxiliary client the config selects, off the turn's path
    assert len(api.bodies) == 3 and {b["model"] for b in api.bodies} == {"claude-test"}

    # searchable beside the messages: a hit names its source session (and the newer fact)
    found = search(host, "where does the team work from", "alice")
    hits = {f["fact"]: f for f in found["facts"]}
    assert hits["The user's team is based in Porto"]["session_id"] == "a1"
    assert hits["The user's team is based in Porto"]["superseded_by"]["fact"] == (
        "The user moved the team to Lisbon")
    assert hits["The user moved the team to Lisbon"]["session_id"] == "a2"
    food = search(host, "dinner ideas without spicy dishes", "alice")
    assert food["facts"][0]["fact"] == "The user cannot eat spicy food"
    # per-user scope: bob never sees alice's facts
    assert "facts" not in search(host, "team Porto Lisbon spicy", "bob")
    # forget: removing the text removes what was derived from it; Porto is current again
    report = provider.forget("Lisbon", "user:alice", False)
    assert any(item.startswith("derived fact") for item in report.items)
    left = {f.text: f for f in list_facts(archive, user="alice")}
    assert "The user moved the team to Lisbon" not in left
    assert left["The user's team is based in Porto"].current
    host.shutdown()


def test_the_turn_never_waits_for_the_model(tmp_path: Path) -> None:
    release = threading.Event()
    asked = threading.Event()

    def held(body: dict[str, Any]) -> Reply:
        asked.set()
        release.wait(30)  # the model "thinks" until the test lets it answer
        return scripted(body)

    with MessagesAPIServer(held) as api:
        host = make_host(tmp_path, api)
        provider = provider_of(host)
        s1 = start(host, "a1", "alice")
        turn(host, s1, "Our team is based in Porto these days")
        # the turn returned while the model is still answering; the archive keeps working
        assert asked.wait(30)
        assert not provider.deriver.idle.is_set()
        turn(host, s1, "what was that again?")
        assert search(host, "Porto", "alice", sid="other")["results"]
        assert list_facts(provider.archive, user="alice") == []
        release.set()
        settle(host)
        assert [f.text for f in list_facts(provider.archive, user="alice")] == [
            "The user's team is based in Porto"]
        assert derivation_state(provider.archive).backlog == 0
        host.shutdown()


def test_a_hanging_or_failing_model_changes_nothing_and_is_retried(tmp_path: Path) -> None:
    mode = {"now": "hang"}
    release = threading.Event()

    def flaky(body: dict[str, Any]) -> Reply | Failure:
        if mode["now"] == "hang":
            release.wait(30)
        if mode["now"] in ("hang", "fail"):
            return Failure(500, "upstream is down")
        return scripted(body)

    with MessagesAPIServer(flaky) as api:
        host = make_host(tmp_path, api)
        provider = provider_of(host)
        provider.deriver.timeout = 1.0  # a hung model costs the lane one second per try
        s1 = start(host, "a1", "alice")
        turn(host, s1, "Our team is based in Porto these days")
        settle(host)
        state = derivation_state(provider.archive)
        assert state.backlog == 1 and state.facts == 0
        assert state.error and "timeout" in state.error and "tried again" in state.error
        release.set()
        mode["now"] = "fail"
        turn(host, s1, "ok")
        settle(host)
        state = derivation_state(provider.archive)
        assert state.backlog == 2 and "server_error" in (state.error or "")
        mode["now"] = "ok"
        turn(host, s1, "thanks")
        settle(host)
        state = derivation_state(provider.archive)
        assert (state.backlog, state.facts, state.error) == (0, 1, None)
        host.shutdown()


@pytest.mark.parametrize("answer, problem", [
    ("I think the user likes Porto", "not JSON"),
    ('{"facts": {"text": "x"}}', "not an object"),
    ('{"facts": [], "notes": "x"}', "not an object"),
])
def test_malformed_answers_are_refused_whole(tmp_path: Path, answer: str, problem: str) -> None:
    with MessagesAPIServer(lambda body: Reply(text=answer)) as api:
        host = make_host(tmp_path, api)
        provider = provider_of(host)
        s1 = start(host, "a1", "alice")
        turn(host, s1, "Our team is based in Porto these days")
        settle(host)
        state = derivation_state(provider.archive)
        assert (state.facts, state.backlog, state.skipped) == (0, 0, 1)
        assert problem in (state.error or "")
        assert provider.archive.count_messages() == 2  # nothing stored was touched
        host.shutdown()


def test_a_fact_citing_another_users_message_is_dropped(tmp_path: Path) -> None:
    """The model names bob's message while reading alice's turn: the fact is refused, the
    turn's other fact is stored, and bob's scope never gets anything."""
    ids: dict[str, int] = {}

    def crossing(body: dict[str, Any]) -> Reply:
        prompt = prompt_of(body)
        mine = [int(i) for i, role, _t in TURN_LINE.findall(prompt) if role == "user"]
        if "bob" in ids and "spicy" in prompt:
            return Reply(text=json.dumps({"facts": [
                {"kind": "state", "topic": "employer", "text": "Works at Bob's company",
                 "sources": [ids["bob"]]},
                {"kind": "preference", "topic": "food", "text": "Cannot eat spicy food",
                 "sources": mine},
                {"kind": "state", "topic": "city", "text": "Lives in Atlantis",
                 "sources": [999_999]}]}))
        return Reply(text='{"facts": []}')

    with MessagesAPIServer(crossing) as api:
        host = make_host(tmp_path, api)
        provider = provider_of(host)
        bob = start(host, "b1", "bob")
        turn(host, bob, "I work at Initech")
        settle(host)
        ids["bob"] = provider.archive.messages("b1")[0].id
        alice = start(host, "a1", "alice")
        turn(host, alice, "I can't handle spicy food")
        settle(host)
        assert [f.text for f in list_facts(provider.archive, user="alice")] == [
            "Cannot eat spicy food"]
        assert list_facts(provider.archive, user="bob") == []
        error = derivation_state(provider.archive).error or ""
        assert f"sources [{ids['bob']}] are not messages of this turn" in error
        assert "sources [999999]" in error
        host.shutdown()


def _turn_fixture() -> Turn:
    return Turn(end=11, session_num=1, session_id="s", user_id=None,
                messages=[(10, "user", "I moved to Lisbon", 1_772_000_000.0),
                          (11, "assistant", "Nice", 1_772_000_001.0)])


@pytest.mark.parametrize("fact, problem", [
    ({"kind": "wish", "topic": "t", "text": "x", "sources": [10]}, "kind 'wish'"),
    ({"kind": "state", "topic": "t", "text": "", "sources": [10]}, "text must be"),
    ({"kind": "state", "topic": "t", "text": "x", "sources": []}, "sources is empty"),
    ({"kind": "state", "topic": "t", "text": "x", "sources": ["10"]}, "list of integer ids"),
    ({"kind": "state", "topic": "t", "text": "x", "sources": [10], "user": "bob"},
     "unexpected keys ['user']"),
    ({"kind": "state", "topic": "t", "text": "x", "sources": [10], "supersedes": [7]},
     "supersedes [7]"),
    ({"kind": "state", "topic": "t", "text": "x", "sources": [10], "valid_from": "soon"},
     "not a date"),
    ({"kind": "state", "text": "x", "sources": [10]}, "missing keys ['topic']"),
])
def test_each_bad_fact_is_refused_with_its_reason(fact: dict[str, Any], problem: str) -> None:
    good = {"kind": "state", "topic": "home", "text": "Lives in Lisbon", "sources": [10]}
    facts, problems = parse_facts(json.dumps({"facts": [fact, good]}), _turn_fixture(), {3})
    assert [f.text for f in facts] == ["Lives in Lisbon"]
    assert len(problems) == 1 and problem in problems[0]


def test_contradictory_facts_in_one_answer_are_both_dropped() -> None:
    answer = {"facts": [
        {"kind": "state", "topic": "Home City", "text": "Lives in Lisbon", "sources": [10]},
        {"kind": "state", "topic": "home  city", "text": "Lives in Porto", "sources": [10]},
        {"kind": "preference", "topic": "food", "text": "Likes fish", "sources": [10],
         "valid_from": "2099-01-01"}]}
    facts, problems = parse_facts("```json\n" + json.dumps(answer) + "\n```", _turn_fixture(),
                                  set())
    assert [f.text for f in facts] == ["Likes fish"]
    assert facts[0].valid_from == _turn_fixture().messages[-1][3]  # never dated in the future
    assert problems and "contradictory facts on 'home city'" in problems[0]


def test_derive_without_a_model_client_is_a_config_error(tmp_path: Path) -> None:
    config = parse_config_text(
        "memory:\n  providers: [session_archive]\nembeddings:\n  embedder: none\n"
        "llm:\n  auxiliary_client: nosuchclient\nsession_archive:\n  derive: true\n",
        tmp_path / "config.yaml")
    host = PluginHost.load(tmp_path, config=config, builtins=False, entry_points=False,
                           directories=False, plugins=[("session_archive", plugin),
                                                       ("anthropic", anthropic_plugin)])
    with pytest.raises(ConfigError, match=r"session_archive\.derive is on but no model client"):
        host.activate_memory_providers()
    host.shutdown()


def test_derive_is_off_by_default(tmp_path: Path, api: MessagesAPIServer) -> None:
    config = parse_config_text(
        "memory:\n  providers: [session_archive]\nembeddings:\n  embedder: none\n"
        f"llm:\n  api_key: k\n  base_url: {api.base_url}\n", tmp_path / "config.yaml")
    built = PluginHost.load(tmp_path, config=config, builtins=False, entry_points=False,
                      directories=False, plugins=[("session_archive", plugin),
                                                  ("anthropic", anthropic_plugin)])
    built.activate_memory_providers()
    provider = provider_of(built)
    assert provider.deriver is None
    turn(built, start(built, "a1", "alice"), "Our team is based in Porto these days")
    assert api.bodies == []
    built.shutdown()



def test_doctor_and_the_cli_show_the_lane_and_the_facts(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from hermes_core.cli import cli
    from hermes_core.config import load_config
    from hermes_core.plugins.memory.session_archive.doctor import archive_checks

    answers = iter([scripted, lambda body: Reply(text="not json at all")])

    def two(body: dict[str, Any]) -> Reply:
        return next(answers)(body)

    with MessagesAPIServer(two) as api:
        (home / "config.yaml").write_text(config_text(api))
        host = make_host(home, api)
        s1 = start(host, "a1", "alice")
        turn(host, s1, "Our team is based in Porto these days")
        turn(host, s1, "hmm")
        settle(host)
        host.shutdown()
    (check,) = [c for c in archive_checks(home, load_config()) if c.name == "derived memory"]
    assert check.ok and check.warning
    assert "1 facts (1 current) from 2 turns, 0 turn(s) waiting" in check.detail
    assert "the answer is not JSON" in check.detail and check.fix
    runner = CliRunner()
    listed = runner.invoke(cli, ["sessions", "facts", "--user", "alice", "--json"],
                           catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    (fact,) = json.loads(listed.output)
    assert (fact["fact"], fact["session_id"], fact["current"]) == (
        "The user's team is based in Porto", "a1", True)
    assert json.loads(runner.invoke(cli, ["sessions", "facts", "--json"]).output) == []
    state = json.loads(runner.invoke(cli, ["sessions", "facts", "--state", "--json"]).output)
    assert state["turns"] == 2 and state["skipped"] == 1 and state["tokens_per_turn"] > 0


def test_facts_get_vectors_and_are_found_by_meaning(tmp_path: Path) -> None:
    """With an embedder each fact is stored with a vector; a query sharing no word with it finds
    it by meaning (a deterministic topic embedder: the plumbing, not a model)."""
    from embedder_support import TopicEmbedder

    from hermes_core.embeddings import GuardedEmbedder
    from hermes_core.plugins.llm.anthropic import AnthropicClient
    from hermes_core.plugins.memory.session_archive import SessionArchive
    from hermes_core.plugins.memory.session_archive.derive import Deriver
    from hermes_core.plugins.memory.session_archive.fact_search import search_facts

    class Food(TopicEmbedder):
        topics = {"spicy": 0, "chili": 0, "hot": 0, "lisbon": 1, "porto": 1}

    embedder = GuardedEmbedder(Food(), timeout=30)
    archive = SessionArchive(tmp_path / "state.db")
    archive.open_session(Session(id="a1"))
    archive.append_messages("a1", [Message("user", "I really can't handle spicy food"),
                                   Message("assistant", "Noted.")])
    with MessagesAPIServer(scripted) as api:
        client = AnthropicClient(api_key="k", base_url=api.base_url, model="aux", max_retries=0)
        deriver = Deriver(lambda: archive, client, lambda fn, label: (fn(), True)[1],
                          embedder=lambda: embedder)
        deriver.wake()  # run_later runs it at once here
    (fact,) = archive.db.read("SELECT text, length(vec) FROM facts")
    assert fact == ("The user cannot eat spicy food", 2 * Food.dimension)
    by_meaning = search_facts(archive, "any chili dishes tonight?", user=None, embedder=embedder)
    assert [f["fact"] for f in by_meaning] == ["The user cannot eat spicy food"]
    assert search_facts(archive, "any chili dishes tonight?", user=None) == []  # words alone
    archive.close()
