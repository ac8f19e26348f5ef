"""``storage migrate`` carries derived memory: every fact arrives with its kind, topic, text,
validity, model, vector, user and sources (on the target's message ids), what superseded it is
linked again, and the target's derivation does not ask the model again about copied turns.
SQLite -> PostgreSQL -> SQLite through the real command, on a real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("psycopg")

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import SessionArchive, open_archive
from hermes_core.plugins.memory.session_archive.config import SessionArchiveConfig
from hermes_core.plugins.memory.session_archive.facts import (
    NewFact,
    derivation_state,
    list_facts,
    pending_turns,
    save_turn,
)
from hermes_core.types import Message, Session

VEC = bytes(range(24))  # what a 12-dimension float16 vector takes


def build(archive: SessionArchive) -> None:
    """Three sessions of two users; the derivation has read the first two turns, not the last."""
    turns = [("s-alice-1", "alice", "My team is based in Porto", "Noted."),
             ("s-bob", "bob", "I cannot eat spicy food", "Understood."),
             ("s-alice-2", "alice", "We moved the team to Lisbon", "Congratulations."),
             ("s-alice-3", "alice", "Anything new about the budget?", "Not yet.")]
    for sid, user, said, answer in turns:
        archive.open_session(Session(id=sid, attributes={"user_id": user}))
        archive.append_messages(sid, [Message("user", said), Message("assistant", answer)])
    derived: dict[str, int] = {}
    for _ in range(3):
        through, (turn,) = pending_turns(archive, limit=1)
        said = turn.messages[0]
        facts = {"Porto": NewFact("state", "team location", "The team is based in Porto",
                                  said[3], [said[0]], vec=VEC),
                 "spicy": NewFact("preference", "food", "Cannot eat spicy food", said[3],
                                  [said[0]]),
                 "Lisbon": NewFact("state", "team location", "The team moved to Lisbon",
                                   said[3], [said[0]], supersedes=[derived.get("Porto", 0)],
                                   vec=VEC)}
        key = next(k for k in facts if k in said[2])
        assert save_turn(archive, turn, through, [facts[key]], model="test-model",
                         input_tokens=10, output_tokens=5, problem=None)
        derived[key] = max(f.id for f in list_facts(archive, all_users=True))


def facts_as_seen(archive: SessionArchive) -> list[tuple[Any, ...]]:
    """Each fact as a user sees it, with its sources' texts (ids differ between archives)."""
    out = []
    for f in list_facts(archive, all_users=True):
        texts = [r[0] for r in archive.db.read(
            f"SELECT content FROM messages WHERE id IN ({','.join('?' * len(f.sources))})",
            tuple(f.sources))]
        newer = [g.text for g in list_facts(archive, all_users=True) if g.id == f.superseded_by]
        out.append((f.text, f.kind, f.topic, f.valid_from, f.current, newer, f.user_id,
                    f.session_id, texts))
    vectors = sorted((r[0], None if r[1] is None else bytes(r[1]), r[2]) for r in archive.db.read(
        "SELECT text, vec, model FROM facts"))
    return [*sorted(out), tuple(vectors)]


def migrate(home: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["storage", "migrate", *args, "--json"],
                                env={"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": ""},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output)["plugins"]["session_archive"])


def test_storage_migrate_carries_the_facts_both_ways(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("embeddings:\n  embedder: none\n")
    with SessionArchive(home / "state.db") as files:
        build(files)
        before = facts_as_seen(files)
        source_state = derivation_state(files)
    assert source_state.backlog == 1 and len(before) == 4  # 3 facts and the vectors row

    report = migrate(home, "--to", pg_url)
    assert report["copied"]["facts"] == 3 and report["detail"]["facts_not_copied"] == 0
    database = open_archive(SessionArchiveConfig(), home, pg_url)
    try:
        assert facts_as_seen(database) == before
        state = derivation_state(database)
        # the copied turns are not derived again; the one the source had not reached is
        assert state.backlog == 1 and state.facts == 3 and state.current == 2
        (_through, (turn,)) = pending_turns(database, limit=5)
        assert turn.messages[0][2] == "Anything new about the budget?"
    finally:
        database.close()
    again = migrate(home, "--to", pg_url)
    assert again["copied"]["facts"] == 0 and again["skipped"]["facts"] == 3

    back = tmp_path / "back"
    back.mkdir()
    (back / "config.yaml").write_text("embeddings:\n  embedder: none\n")
    migrate(back, "--from", pg_url)
    with SessionArchive(back / "state.db") as returned:
        assert facts_as_seen(returned) == before
        assert derivation_state(returned).backlog == 1


def test_a_fact_whose_evidence_did_not_arrive_stays_behind(tmp_path: Path, pg_url: str) -> None:
    """The target already holds the session with other messages at that position: the fact has
    no twin to cite, so it is not copied (and says so), nothing else is disturbed."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("embeddings:\n  embedder: none\n")
    with SessionArchive(home / "state.db") as files:
        build(files)
    database = open_archive(SessionArchiveConfig(), home, pg_url)
    try:
        database.open_session(Session(id="s-bob", attributes={"user_id": "bob"}))
        database.append_messages("s-bob", [Message("user", "something else entirely")])
    finally:
        database.close()
    report = migrate(home, "--to", pg_url)
    assert report["copied"]["facts"] == 2 and report["detail"]["facts_not_copied"] == 1
    assert any("1 left behind" in line for line in report["lines"])
    database = open_archive(SessionArchiveConfig(), home, pg_url)
    try:
        assert {f.text for f in list_facts(database, all_users=True)} == {
            "The team is based in Porto", "The team moved to Lisbon"}
    finally:
        database.close()
