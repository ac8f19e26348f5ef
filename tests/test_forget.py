"""``forget`` everywhere and ``sessions delete``: real files, real SQLite, the real CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.file_memory import MemoryStore
from hermes_core.plugins.memory.session_archive import SessionArchive, search_messages
from hermes_core.plugins.memory.session_archive.forget import delete_sessions, forget_messages
from hermes_core.plugins.memory.skills.library import SkillLibrary
from hermes_core.types import ForgetReport, Message, Session, ToolCall


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def fts_rows(db: Path, word: str) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                           (word,)).fetchone()[0]
    finally:
        con.close()


def seed_everything(home: Path) -> None:
    store = MemoryStore(home / "memories")
    store.add("user", "Name: Ana")
    store.add("user", "Lives in Lisbon since 2025")
    store.add("memory", "Deploys run on Fridays")
    with SessionArchive(home / "state.db") as archive:
        s1, s2 = Session(id="s1"), Session(id="s2")
        archive.append_message(s1, Message("user", "I moved to lisbon last spring"))
        archive.append_message(s1, Message("assistant", "Nice, Portugal is lovely."))
        archive.append_message(s2, Message("user", "What is the weather like?"))
        archive.append_message(s2, Message("assistant", "", tool_calls=[
            ToolCall("t1", "weather", {"city": "Lisbon"})]))
        archive.append_message(s2, Message("tool", "sunny", tool_call_id="t1", tool_name="weather"))
    SkillLibrary(home / "skills").create("lisbon-trams", "Which tram to take in Lisbon",
                                         "Take tram 28.")
    SkillLibrary(home / "skills").create("deploy", "How to deploy", "Run make deploy.")


def test_forget_lisbon_everywhere_in_one_run(home):
    seed_everything(home)
    with SessionArchive(home / "state.db") as archive:
        assert len(search_messages(archive, "Lisbon").hits) == 2

    dry = invoke("forget", "Lisbon", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = {r["provider"]: r for r in json.loads(dry.output)["plan"]}
    assert plan["file_memory"]["matched"] == 1 and plan["session_archive"]["matched"] == 2
    assert plan["skills"]["matched"] == 1 and plan["skills"]["deleted"] == 0
    assert "Lisbon" in (home / "memories" / "USER.md").read_text()  # a dry run deletes nothing

    result = invoke("forget", "Lisbon", "--json", "--yes")
    assert result.exit_code == 0, result.output
    done = {r["provider"]: r for r in json.loads(result.output)["result"]}
    assert {p: r["deleted"] for p, r in done.items()} == {
        "file_memory": 1, "session_archive": 2, "skills": 1}
    assert (home / "memories" / "USER.md").read_text() == "Name: Ana\n"
    with SessionArchive(home / "state.db") as archive:
        assert search_messages(archive, "Lisbon").hits == []
        assert archive.count_messages() == 3
    assert fts_rows(home / "state.db", "lisbon") == 0
    assert not (home / "skills" / "lisbon-trams.md").exists()
    assert (home / "skills" / "deploy.md").exists()

    # the deletion is a version, and the forgotten text is nowhere in the history
    history = (home / "memories" / "history.jsonl").read_text()
    assert "lisbon" not in history.casefold()
    versions = json.loads(invoke("memory", "history", "--json").output)
    assert versions[-1]["action"] == "forget" and versions[-1]["changes"][0]["entries"] == 1
    # a rollback to before the forget cannot bring it back
    assert invoke("memory", "rollback", "2").exit_code == 0
    assert "Lisbon" not in (home / "memories" / "USER.md").read_text()


def test_text_output_and_nothing_matched(home):
    seed_everything(home)
    result = invoke("forget", "Atlantis")
    assert result.exit_code == 0 and "Nothing mentions 'Atlantis'" in result.output
    shown = invoke("forget", "Fridays", "--yes")
    assert "file_memory: would delete 1 of 3 item(s)" in shown.output
    assert "file_memory: deleted 1 item(s)" in shown.output


@pytest.mark.parametrize(("text", "needle"), [("   ", "empty"), ("ab", "too short")])
def test_bad_subjects_are_refused(home, text, needle):
    seed_everything(home)
    before = (home / "memories" / "USER.md").read_bytes()
    result = CliRunner().invoke(cli, ["forget", text])
    assert result.exit_code == 1 and needle in result.output
    assert (home / "memories" / "USER.md").read_bytes() == before


BROKEN = '''
from hermes_core import hookimpl, MemoryProvider

class Broken(MemoryProvider):
    name = "broken"

    @hookimpl
    def forget(self, subject, scope, dry_run):
        if not dry_run:
            raise RuntimeError("backend unreachable")
        from hermes_core.types import ForgetReport
        return ForgetReport("broken", matched=1, dry_run=True, items=["remote record 7"])

@hookimpl
def register_memory_providers(register):
    register(Broken)
'''


def test_a_provider_whose_forget_raises_is_reported_and_the_others_still_delete(home,
                                                                                 dir_plugin):
    seed_everything(home)
    dir_plugin("broken", BROKEN)
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, broken, session_archive]\n")
    result = CliRunner().invoke(cli, ["forget", "Lisbon", "--json", "--yes"])
    assert result.exit_code == 1
    rows = {r["provider"]: r for r in json.loads(result.output)["result"]}
    assert "backend unreachable" in rows["broken"]["error"]
    assert rows["file_memory"]["deleted"] == 1 and rows["session_archive"]["deleted"] == 2


def test_hook_forget(home):
    """The hook through a real host: every built-in answers with a ForgetReport."""
    from hermes_core.cli._common import load_host
    from hermes_core.cli.forget_cmd import _forget_hook

    seed_everything(home)
    host = load_host()
    host.activate_memory_providers()
    try:
        outcomes = _forget_hook(host, "Fridays", "all", True)
        reports = {o.plugin: o.value for o in outcomes}
        # None: a plugin keeping nothing that could match (the webhook's kept answers, here)
        assert all(isinstance(v, ForgetReport) for v in reports.values() if v is not None)
        assert sum(isinstance(v, ForgetReport) for v in reports.values()) >= 2
        assert reports["memory-provider:file_memory"].items == ["MEMORY.md: Deploys run on Fridays"]
        scoped = _forget_hook(host, "Fridays", "user:u1", False)
        by_name = {o.plugin: o.value for o in scoped}
        assert "shared by every user" in by_name["memory-provider:file_memory"].cannot_delete
        assert by_name["memory-provider:session_archive"].matched == 0
    finally:
        host.shutdown()
    assert "Fridays" in (home / "memories" / "MEMORY.md").read_text()


def test_archive_forget_matches_case_and_whitespace_and_scope(tmp_path):
    with SessionArchive(tmp_path / "state.db") as archive:
        archive.open_session(Session(id="a", attributes={"user_id": "u1"}))
        archive.open_session(Session(id="b", attributes={"user_id": "u2"}))
        archive.append_message("a", Message("user", "my  ZÜRICH\nflat"))
        archive.append_message("b", Message("user", "zürich flat too"))
        archive.set_title("b", "Flat in Zürich")
        only_u1 = forget_messages(archive, "zürich flat", scope="user:u1")
        assert [m[1] for m in only_u1.messages] == ["a"] and only_u1.deleted == 1
        rest = forget_messages(archive, "Zürich", dry_run=True)
        assert len(rest.messages) == 1 and rest.titles == ["b"] and rest.deleted == 0
        forget_messages(archive, "Zürich")
        assert archive.get_session("b").title is None and archive.count_messages() == 0
        with pytest.raises(ValueError, match="unknown scope"):
            forget_messages(archive, "x y z", scope="team")


def _chain(archive: SessionArchive) -> None:
    archive.append_message(Session(id="root"), Message("user", "alpha start"))
    archive.open_session(Session(id="child", parent_session_id="root"), origin="compression")
    archive.append_message("child", Message("user", "alpha continued"))
    archive.append_message(Session(id="other"), Message("user", "alpha elsewhere"))


def test_sessions_delete_leaves_no_row_in_messages_or_the_index(home):
    with SessionArchive(home / "state.db") as archive:
        _chain(archive)
    result = invoke("sessions", "delete", "other", "--json")
    assert result.exit_code == 0 and json.loads(result.output) == {"sessions": ["other"],
                                                                    "messages": 1}
    con = sqlite3.connect(home / "state.db")
    try:
        assert con.execute("SELECT count(*) FROM messages m JOIN sessions s ON s.num = m.session "
                           "WHERE s.id = 'other'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM sessions WHERE id = 'other'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH "
                           "'elsewhere'").fetchone()[0] == 0
    finally:
        con.close()
    chained = invoke("sessions", "delete", "child", "--chain")
    assert chained.exit_code == 0 and "Deleted 2 session(s)" in chained.output
    assert fts_rows(home / "state.db", "alpha") == 0
    with SessionArchive(home / "state.db") as archive:
        assert archive.count_messages() == 0 and archive.list_sessions() == []


def test_deleting_the_newest_of_a_chain_shows_its_parent_again(tmp_path):
    with SessionArchive(tmp_path / "state.db") as archive:
        _chain(archive)
        assert [r.id for r in archive.list_sessions()] == ["other", "child"]
        delete_sessions(archive, "child")
        assert sorted(r.id for r in archive.list_sessions()) == ["other", "root"]
        delete_sessions(archive, "root")
        assert [r.id for r in archive.list_sessions()] == ["other"]


def test_sessions_delete_errors(home):
    assert "no session archive" in CliRunner().invoke(cli, ["sessions", "delete", "x"]).output
    with SessionArchive(home / "state.db") as archive:
        _chain(archive)
    result = CliRunner().invoke(cli, ["sessions", "delete", "nope"])
    assert result.exit_code == 1 and "no session 'nope'" in result.output


def test_lossless_store_forget(tmp_path):
    from hermes_core.plugins.context_engine.lossless.store import SpanStore

    store = SpanStore(tmp_path / "context.db")
    store.add_span("c1", [Message("user", "we met in Lisbon"),
                          Message("assistant", "", tool_calls=[
                              ToolCall("t", "note", {"place": "Lisbon"})]),
                          Message("user", "unrelated")], digest="talk about Lisbon")
    assert len(store.search("c1", "Lisbon")) == 2
    hits, digests = store.forget("lisbon", dry_run=True)
    assert len(hits) == 2 and digests == 1 and len(store.search("c1", "Lisbon")) == 2
    store.forget("lisbon")
    assert store.search("c1", "Lisbon") == [] and len(store.search("c1", "unrelated")) == 1
    assert "Lisbon" not in store.spans("c1")[0].digest
    con = sqlite3.connect(tmp_path / "context.db")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.execute("INSERT INTO span_fts(span_fts) VALUES ('integrity-check')")
    con.close()
    store.close()
