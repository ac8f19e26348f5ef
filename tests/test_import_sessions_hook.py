"""``import_sessions``: an importer's sessions reach the archive through the hook, on either
backend, with the lineage kept, nothing written on a dry run and nothing twice; and plugins add
sub-commands to the kernel's ``import`` group (``register(command, group="import")``)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.config import load_config
from hermes_core.host import PluginHost
from hermes_core.storage import resolve_storage_url
from hermes_core.storage.transfer import StorageSide, merge_reports

LINES = [
    {"type": "session", "format": "hermes-core-session/1", "id": "imp-a", "platform": "cli",
     "started_at": 1700000000.0, "title": "Printer"},
    {"type": "message", "session_id": "imp-a", "role": "user", "content": "printer shows E42",
     "timestamp": 1700000001.0},
    {"type": "session", "format": "hermes-core-session/1", "id": "imp-b", "platform": "cli",
     "started_at": 1700000100.0, "parent_session_id": "imp-a", "origin": "compression"},
    {"type": "message", "session_id": "imp-b", "role": "assistant", "content": "try lpstat",
     "timestamp": 1700000101.0},
]


def _import(home: Path, path: Path, *, dry_run: bool) -> dict[str, object]:
    host = PluginHost.load(home, config=load_config(home))
    target = StorageSide(home, host.config, resolve_storage_url(host.config.core.storage.url))
    seen: list[tuple[str, int, int]] = []
    outcomes = host.hooks.import_sessions(target=target, path=path, dry_run=dry_run,
                                          progress=lambda *a: seen.append(a))
    assert seen and seen[-1][1] == seen[-1][2] == path.stat().st_size
    return merge_reports(outcomes)


def test_hook_import_sessions(tmp_path: Path, storage_url: str | None,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERMES_CORE_HOME", str(home))
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")

    dry = _import(home, path, dry_run=True)
    assert dry["copied"] == {"sessions": 2, "messages": 2} and dry["errors"] == []
    assert not (home / "state.db").exists()
    done = _import(home, path, dry_run=False)
    assert done["copied"] == {"sessions": 2, "messages": 2}
    assert list(done["plugins"]) == ["session_archive"]  # type: ignore[arg-type]
    again = _import(home, path, dry_run=False)
    assert again["copied"] == {"sessions": 0, "messages": 0}
    assert again["skipped"] == {"sessions": 2}

    env = {"HERMES_CORE_HOME": str(home)}
    shown = CliRunner().invoke(cli, ["sessions", "show", "imp-b", "--json"], env=env)
    session = json.loads(shown.output)["session"]
    assert (session["parent_session_id"], session["chain_root"]) == ("imp-a", "imp-a")
    hits = json.loads(CliRunner().invoke(cli, ["sessions", "search", "lpstat", "--json"],
                                         env=env).output)["hits"]
    assert [h["session_id"] for h in hits] == ["imp-b"]


IMPORTER = '''
import click
from hermes_core import hookimpl

@click.command("notes")
@click.argument("path")
def notes(path):
    """Import notes from PATH."""
    click.echo(f"imported {path}")

@hookimpl
def register_commands(register):
    register(notes, group="import")
'''


def test_plugins_add_importers_to_the_import_group(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "plugins" / "notes_importer"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(IMPORTER), encoding="utf-8")
    env = {"HERMES_CORE_HOME": str(home)}
    ran = CliRunner().invoke(cli, ["import", "notes", "x.txt"], env=env)
    assert ran.exit_code == 0 and ran.output.strip() == "imported x.txt"
    listed = CliRunner().invoke(cli, ["import", "--help"], env=env)
    assert "notes" in listed.output and "Import notes from PATH." in listed.output
    unknown = CliRunner().invoke(cli, ["import", "letta"], env=env)
    assert unknown.exit_code == 2
    assert "no importer 'letta'" in unknown.output and "notes" in unknown.output
    # a top-level 'notes' command is another name: the group keeps its own namespace
    host = PluginHost.load(home, config=load_config(home))
    assert "notes" in host.subcommands["import"] and "notes" not in host.commands
    assert host.records["notes_importer"].registers == ["command:import notes"]


def test_register_under_an_unknown_group_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "plugins" / "bad_group"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(
        IMPORTER.replace('group="import"', 'group="sessions"')), encoding="utf-8")
    host = PluginHost.load(home, config=load_config(home))
    error = host.records["bad_group"].error or ""
    assert "'sessions', which is not a kernel command group" in error
