"""``hermes-core memory review [SESSION_ID]``: a real state.db, the loopback Messages API."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_curation_review import FACT, MARK, _ends_with_tool_result, _text

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive.store import SessionArchive
from hermes_core.testing import Failure, MessagesAPIServer, Reply
from hermes_core.types import Message, Session


def _answer(body):
    assert MARK in _text(body), "only review requests are expected"
    if _ends_with_tool_result(body):
        return "Saved."
    return Reply(tool_calls=[{"name": "memory", "input": {
        "action": "add", "target": "user", "content": FACT}}])


def _setup(home, api, sessions: dict[str, list[str]]) -> None:
    (home / "config.yaml").write_text(
        f"llm:\n  base_url: {api.base_url}\n  api_key: k\n  max_retries: 0\n", encoding="utf-8")
    with SessionArchive(home / "state.db") as archive:
        for sid, texts in sessions.items():
            session = Session(id=sid)
            for i, text in enumerate(texts):
                archive.append_message(session, Message("user" if i % 2 == 0 else "assistant", text))


def test_review_of_the_newest_session(home):
    with MessagesAPIServer(_answer) as api:
        _setup(home, api, {"20250101_000000_aaaaaa": ["old talk", "ok"],
                           "20250102_000000_bbbbbb": ["use km please", "noted"]})
        result = CliRunner().invoke(cli, ["sessions", "review"])
    assert result.exit_code == 0, result.output
    assert f'memory updated: added to USER.md: "{FACT}"' in result.output
    assert "use km please" in _text(api.bodies[0]) and "old talk" not in _text(api.bodies[0])
    assert (home / "memories" / "USER.md").read_text(encoding="utf-8") == f"{FACT}\n"
    with SessionArchive(home / "state.db") as archive:  # the review added nothing to the archive
        assert archive.count_messages() == 4


def test_review_of_a_named_session_as_json(home):
    with MessagesAPIServer(_answer) as api:
        _setup(home, api, {"20250101_000000_aaaaaa": ["old talk", "ok"],
                           "20250102_000000_bbbbbb": ["new talk", "ok"]})
        result = CliRunner().invoke(cli, ["sessions", "review", "20250101_000000_aaaaaa", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["session_id"] == "20250101_000000_aaaaaa" and report["calls"] == 2
    assert report["writes"] == [f'added to USER.md: "{FACT}"'] and report["error"] is None
    assert "old talk" in _text(api.bodies[0])


def test_review_errors_are_clear(home):
    with MessagesAPIServer(lambda body: Failure(500, "down")) as api:
        runner = CliRunner()
        (home / "config.yaml").write_text(f"llm:\n  base_url: {api.base_url}\n  api_key: k\n"
                                          "  max_retries: 0\n", encoding="utf-8")
        empty = runner.invoke(cli, ["sessions", "review"])
        assert empty.exit_code == 1 and "no session archive" in empty.output
        _setup(home, api, {"20250101_000000_aaaaaa": ["hello", "hi"]})
        unknown = runner.invoke(cli, ["sessions", "review", "nope"])
        assert unknown.exit_code == 1 and "nope" in unknown.output
        failed = runner.invoke(cli, ["sessions", "review"])
        assert failed.exit_code == 1 and "the review model failed" in failed.output
        assert "Nothing was written" in failed.output and "Traceback" not in failed.output
    assert not (home / "memories" / "USER.md").exists()


def test_review_reads_the_storage_url_archive(home, pg_url):
    """With storage.url set the review reads the PostgreSQL archive, as every other ``sessions``
    command does (it opened the SQLite file: "no session archive", or an older file's sessions)."""
    from hermes_core.plugins.memory.session_archive.store import PgSessionArchive
    from hermes_core.storage import parse_storage_url

    with MessagesAPIServer(_answer) as api:
        _setup(home, api, {"20250101_000000_aaaaaa": ["talk kept in the old file", "ok"]})
        with open(home / "config.yaml", "a", encoding="utf-8") as config:
            config.write(f"storage:\n  url: {pg_url}\n")
        runner = CliRunner()
        empty = runner.invoke(cli, ["sessions", "review"])
        assert empty.exit_code == 1 and "holds no session yet" in empty.output, empty.output
        assert pg_url not in empty.output  # the URL may hold a password
        archive = PgSessionArchive(parse_storage_url(pg_url))
        try:
            archive.append_message(Session(id="20250102_000000_bbbbbb"),
                                   Message("user", "use km please"))
        finally:
            archive.close()
        result = runner.invoke(cli, ["sessions", "review"])
    assert result.exit_code == 0, result.output
    assert "use km please" in _text(api.bodies[0])
    assert "old file" not in _text(api.bodies[0])
