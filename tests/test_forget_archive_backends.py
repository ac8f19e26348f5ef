"""``hermes-core forget`` in the session archive on both backends: SQLite and PostgreSQL.

Real CLI, a real SQLite file or a throwaway PostgreSQL database; the same seed and the same
answers on each (dry run, then the deletion, then ``sessions search`` finds nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import SessionArchiveConfig, open_archive
from hermes_core.types import Message, Session, ToolCall

CONFIG = "memory:\n  providers: [session_archive]\n"


def _run(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _seeded(home: Path, backend: str, request: pytest.FixtureRequest) -> str | None:
    """The home's config for ``backend``, the seed written; the storage URL (None: SQLite)."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    (home / "config.yaml").write_text(CONFIG + (f"storage:\n  url: {url}\n" if url else ""),
                                      encoding="utf-8")
    _seed(home, url)
    return url


def _seed(home: Path, url: str | None) -> None:
    archive = open_archive(SessionArchiveConfig(), home, url)
    try:
        archive.open_session(Session(id="a1", title="Lisbon plans", attributes={"user_id": "Ann"}))
        archive.append_messages("a1", [
            Message("user", "I moved to   LISBON last spring"),
            Message("assistant", "", tool_calls=[ToolCall("t1", "weather", {"city": "Lisbon"})]),
            Message("tool", "sunny", tool_name="weather", tool_call_id="t1"),
            Message("user", "100% of my_plans are set"),
        ])
        archive.open_session(Session(id="b1", attributes={"user_id": "ann"}))
        archive.append_messages("b1", [Message("user", "my sister lives in Lisbon too")])
    finally:
        archive.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_forget_in_the_archive_on_both_backends(home: Path, backend: str,
                                                request: pytest.FixtureRequest) -> None:
    url = _seeded(home, backend, request)
    plan = _run("forget", "lisbon", "--dry-run", "--json")["plan"][0]
    assert (plan["provider"], plan["error"], plan["matched"], plan["deleted"]) == (
        "session_archive", None, 4, 0), plan  # 3 messages and a title
    # LIKE's wildcards in the subject are taken literally (the prefilter must not match "100 my")
    literal = _run("forget", "100% of my_plans", "--dry-run", "--json")["plan"][0]
    assert literal["matched"] == 1, literal
    assert _run("forget", "100% of myXplans", "--dry-run", "--json")["plan"][0]["matched"] == 0
    done = _run("forget", "lisbon", "--json", "--yes")["result"][0]
    assert (done["error"], done["deleted"]) == (None, 4), done
    archive = open_archive(SessionArchiveConfig(), home, url)
    try:
        left = [m.content for sid in ("a1", "b1") for m in archive.messages(sid)]
        assert not [c for c in left if "lisbon" in c.lower()], left
        assert "100% of my_plans are set" in left and "sunny" in left
    finally:
        archive.close()
    found = CliRunner().invoke(cli, ["sessions", "search", "Lisbon", "--json"],
                               catch_exceptions=False)
    assert found.exit_code == 0 and json.loads(found.output)["hits"] == [], found.output


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_forget_for_one_user_in_the_archive(home: Path, backend: str,
                                            request: pytest.FixtureRequest) -> None:
    from hermes_core.cli._common import load_host
    from hermes_core.cli.forget_cmd import _forget_hook

    url = _seeded(home, backend, request)
    host = load_host()
    host.activate_memory_providers()
    try:
        outcomes = _forget_hook(host, "Lisbon", "user:ann", False)
    finally:
        host.shutdown()
    report = {o.plugin: o for o in outcomes}["memory-provider:session_archive"]
    assert report.error is None and report.value.deleted == 1, report
    archive = open_archive(SessionArchiveConfig(), home, url)
    try:
        assert [m.content for m in archive.messages("b1")] == []
        assert "I moved to   LISBON last spring" in [m.content for m in archive.messages("a1")]
    finally:
        archive.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize(("argument", "subject"), [
    ("C:\\Users\\maria\\payroll.xlsx", "users\\maria\\payroll"),  # doubled in the JSON
    ("To:\nMaria Costa", "to: maria costa"),  # a line break: whitespace, as forget matches
    ('the "Maria" file', '"maria" file'),  # quotes, escaped in the JSON
])
def test_forget_matches_tool_call_arguments_as_written(home: Path, backend: str, argument: str,
                                                       subject: str,
                                                       request: pytest.FixtureRequest) -> None:
    """Tool calls are stored as JSON; forget matches their arguments as the model wrote them
    (what the word index holds and a search shows), not their JSON escapes."""
    from hermes_core.plugins.memory.session_archive.forget import forget_messages

    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    archive = open_archive(SessionArchiveConfig(), home, url)
    try:
        archive.open_session(Session(id="a1"))
        archive.append_messages("a1", [
            Message("user", "open it"),
            Message("assistant", "", tool_calls=[ToolCall("t1", "read_file", {"path": argument})]),
        ])
        assert len(forget_messages(archive, subject, dry_run=True).messages) == 1
        assert forget_messages(archive, subject).deleted == 1
        assert [m.content for m in archive.messages("a1")] == ["open it"]
    finally:
        archive.close()
