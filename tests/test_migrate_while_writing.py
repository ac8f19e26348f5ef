"""``storage migrate`` and ``sessions import`` while a node still writes to the source archive.

A session copied before its conversation went on used to be "already there" for ever: its later
messages were never copied, and running the migration again said everything was done. Now the
import completes a session that holds exactly the first messages of the imported one, and the
migration copies again what was written during its pass (and warns when the source is still
changing at the end). Real state.db files and the conftest's real PostgreSQL server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import migrate as migrate_mod
from hermes_core.plugins.memory.session_archive.migrate import copy_sessions
from hermes_core.plugins.memory.session_archive.store import PgSessionArchive, SessionArchive
from hermes_core.plugins.memory.session_archive.transfer import (
    ImportReport,
    export_session,
    import_jsonl,
)
from hermes_core.storage import parse_storage_url
from hermes_core.types import Message, Session, Usage


def target_of(tmp_path: Path, storage_url: str | None) -> SessionArchive:
    if storage_url:
        return PgSessionArchive(parse_storage_url(storage_url))
    return SessionArchive(tmp_path / "target.db")


def contents(archive: SessionArchive, sid: str) -> list[str]:
    return [m.content for m in archive.messages(sid)]


def export(archive: SessionArchive, path: Path, *ids: str) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        export_session(archive, list(ids), out)
    return path


def test_an_import_completes_a_session_that_went_on_after_it_was_copied(tmp_path, storage_url):
    source = SessionArchive(tmp_path / "source.db")
    source.open_session(Session(id="s1", title="Printer"))
    source.append_message("s1", Message("user", "the printer shows E42"))
    target = target_of(tmp_path, storage_url)
    first = import_jsonl(target, export(source, tmp_path / "a.jsonl", "s1"))
    assert first.sessions_imported == 1
    source.append_message("s1", Message("assistant", "try lpstat"),
                          usage=Usage(input_tokens=40, output_tokens=5))
    source.end_session("s1", "user_exit")
    again = import_jsonl(target, export(source, tmp_path / "b.jsonl", "s1"))
    assert (again.sessions_completed, again.messages_imported) == (1, 1)
    assert contents(target, "s1") == ["the printer shows E42", "try lpstat"]
    record = target.get_session("s1")
    assert (record.message_count, record.input_tokens, record.end_reason) == (2, 40, "user_exit")
    third = import_jsonl(target, export(source, tmp_path / "c.jsonl", "s1"))
    assert (third.sessions_completed, third.messages_imported) == (0, 0)  # nothing twice


def test_an_import_leaves_a_session_whose_messages_differ_alone(tmp_path, storage_url):
    source = SessionArchive(tmp_path / "source.db")
    source.append_message("s1", Message("user", "one"))
    source.append_message("s1", Message("user", "two"))
    target = target_of(tmp_path, storage_url)
    target.append_message("s1", Message("user", "another conversation"))
    report = import_jsonl(target, export(source, tmp_path / "a.jsonl", "s1"))
    assert (report.sessions_skipped, report.sessions_completed) == (1, 0)
    assert contents(target, "s1") == ["another conversation"]


def test_migrate_copies_what_a_node_wrote_during_the_copy(tmp_path, storage_url, monkeypatch):
    source = SessionArchive(tmp_path / "source.db")
    for sid in ("s1", "s2"):
        source.append_message(sid, Message("user", f"{sid} first"))
    target = target_of(tmp_path, storage_url)
    real = migrate_mod.import_jsonl
    calls: list[int] = []

    def import_while_a_node_writes(archive: Any, path: Path) -> ImportReport:
        out = real(archive, path)
        if not calls:  # right after the first batch: the node goes on writing to the source
            source.append_message("s1", Message("assistant", "s1 reply"))
            source.append_message("s3", Message("user", "s3 new session"))
        calls.append(1)
        return out

    monkeypatch.setattr(migrate_mod, "import_jsonl", import_while_a_node_writes)
    out = ImportReport()
    copy_sessions(source, target, out)
    assert contents(target, "s1") == ["s1 first", "s1 reply"]
    assert contents(target, "s3") == ["s3 new session"]
    assert not out.still_changing


def test_the_migrate_command_warns_while_the_source_keeps_changing(tmp_path, pg_url,
                                                                   monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    source = SessionArchive(home / "state.db")
    source.append_message("s1", Message("user", "first"))
    real = migrate_mod.import_jsonl
    count = iter(range(1000))

    def import_while_a_node_writes(archive: Any, path: Path) -> ImportReport:
        out = real(archive, path)
        source.append_message("s1", Message("user", f"more {next(count)}"))  # never stops
        return out

    monkeypatch.setattr(migrate_mod, "import_jsonl", import_while_a_node_writes)
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": ""}
    result = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url, "--json"], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    archive = report["plugins"]["session_archive"]
    assert archive["detail"]["source_still_changing"] is True
    assert any("still being written" in line for line in archive["lines"])
    monkeypatch.setattr(migrate_mod, "import_jsonl", real)  # the node stopped: run it again
    result = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url, "--json"], env=env,
                                catch_exceptions=False)
    target = PgSessionArchive(parse_storage_url(pg_url))
    assert contents(target, "s1") == contents(source, "s1")
