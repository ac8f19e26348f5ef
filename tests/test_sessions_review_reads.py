"""What ``hermes-core sessions review`` reads from the archive, beyond its own tests
(test_curation_cli.py): the named session itself, the newest session of any platform, and no
archive created where there is none. The agent's ``load_session`` hook answers differently on each
(it follows a compaction chain to its newest session, takes the platform's last session, and
needs the archive open): a move of the command onto that hook has to keep these."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_curation_cli import _answer
from test_curation_review import _text

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive.store import SessionArchive
from hermes_core.testing import MessagesAPIServer
from hermes_core.types import Message, Session

PARENT, CHILD, WEB = "20250101_000000_aaaaaa", "20250101_000001_bbbbbb", "20250102_000000_cccccc"


def _config(home, api) -> None:
    (home / "config.yaml").write_text(
        f"llm:\n  base_url: {api.base_url}\n  api_key: k\n  max_retries: 0\n", encoding="utf-8")


def _archive(home) -> None:
    """A cli conversation compacted into a child session, then a newer webhook conversation."""
    with SessionArchive(home / "state.db") as archive:
        archive.append_message(Session(id=PARENT, platform="cli"), Message("user", "parent talk"))
        archive.append_message(Session(id=CHILD, platform="cli", parent_session_id=PARENT),
                               Message("user", "child talk"))
        archive.append_message(Session(id=WEB, platform="webhook"), Message("user", "webhook talk"))


def test_a_named_session_is_reviewed_itself_not_its_compaction_child(home):
    with MessagesAPIServer(_answer) as api:
        _config(home, api)
        _archive(home)
        result = CliRunner().invoke(cli, ["sessions", "review", PARENT, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["session_id"] == PARENT
    assert "parent talk" in _text(api.bodies[0]) and "child talk" not in _text(api.bodies[0])


def test_without_an_id_the_newest_session_of_any_platform_is_reviewed(home):
    with MessagesAPIServer(_answer) as api:
        _config(home, api)
        _archive(home)
        result = CliRunner().invoke(cli, ["sessions", "review", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["session_id"] == WEB
    assert "webhook talk" in _text(api.bodies[0]) and "child talk" not in _text(api.bodies[0])


def test_a_home_without_an_archive_gets_none_from_a_review(home):
    with MessagesAPIServer(_answer) as api:
        _config(home, api)
        result = CliRunner().invoke(cli, ["sessions", "review"])
    assert result.exit_code == 1 and "no session archive" in result.output, result.output
    assert not api.bodies and not (home / "state.db").exists()


def test_a_home_with_the_memory_review_turned_off_gets_no_review(home):
    """plugins.disabled: [memory_review] turns the review off in chats; the command says so
    instead of running one, and asks no model."""
    with MessagesAPIServer(_answer) as api:
        _config(home, api)
        with (home / "config.yaml").open("a", encoding="utf-8") as config:
            config.write("plugins:\n  disabled: [memory_review]\n")
        _archive(home)
        result = CliRunner().invoke(cli, ["sessions", "review", PARENT])
    assert result.exit_code == 1, result.output
    assert "memory review is off" in result.output and "plugins.disabled" in result.output
    assert not api.bodies
    with SessionArchive(home / "state.db") as archive:  # what was stored is left as it was
        assert [m.content for m in archive.messages(PARENT)] == ["parent talk"]
