"""``doctor_checks`` and ``copy_storage``: a third-party plugin's store takes part in ``doctor``
and ``storage migrate`` exactly like a built-in one. The throwaway plugins are directory plugins
written into the test's home (the way a user installs one); migrations run against the real
throwaway PostgreSQL server."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from hermes_core import config as config_module
from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.types import Message, Session

#: a third-party plugin with its own store: notes/*.txt in the home, or a table of its own
#: (its own component and migration) in the storage.url database
NOTES_PLUGIN = '''
from hermes_core import hookimpl
from hermes_core.doctor import DoctorCheck
from hermes_core.storage.component import open_component
from hermes_core.storage.transfer import CopyReport

MIGRATIONS = [(1, "the notes table",
               ["CREATE TABLE notes_entries (name TEXT PRIMARY KEY, body TEXT NOT NULL)"])]


def _read(side):
    if side.url is None:
        folder = side.home / "notes"
        if not folder.is_dir():
            return {}
        return {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.txt"))}
    with open_component(side.url, "notes", MIGRATIONS).connection() as con:
        return dict(con.execute("SELECT name, body FROM notes_entries ORDER BY name").fetchall())


def _add(side, name, body):
    """Add one note unless the side holds that name already (never overwrite)."""
    if side.url is None:
        path = side.home / "notes" / f"{name}.txt"
        path.parent.mkdir(exist_ok=True)
        if path.exists():
            return False
        path.write_text(body, encoding="utf-8")
        return True
    with open_component(side.url, "notes", MIGRATIONS).connection() as con:
        return con.execute("INSERT INTO notes_entries (name, body) VALUES (%s, %s) "
                           "ON CONFLICT (name) DO NOTHING", (name, body)).rowcount == 1


@hookimpl
def doctor_checks(home, config):
    folder = home / "notes"
    count = len(list(folder.glob("*.txt"))) if folder.is_dir() else 0
    return [DoctorCheck("notes folder", True, f"{folder}: {count} note(s)",
                        warning=count == 0, fix=None if count else "write a note first")]


@hookimpl
def copy_storage(source, target, progress):
    notes = _read(source)
    copied, skipped = [], []
    for done, (name, body) in enumerate(sorted(notes.items())):
        progress("notes", done, len(notes))
        (copied if _add(target, name, body) else skipped).append(name)
    progress("notes", len(notes), len(notes))
    return CopyReport(copied={"notes": len(copied)}, skipped={"notes": len(skipped)},
                      lines=[f"{len(copied)} note(s) copied, {len(skipped)} already there"],
                      detail={"copied": copied})
'''


def _plugin(home: Path, name: str, source: str) -> None:
    folder = home / "plugins" / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(textwrap.dedent(source), encoding="utf-8")


def _invoke(home: Path, *args: str, url: str = "") -> Result:
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": url}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def _fill(home: Path) -> None:
    with SessionArchive(home / "state.db") as archive:
        archive.open_session(Session(id="s1", title="Printer"))
        archive.append_messages("s1", [Message("user", "the printer shows E42"),
                                       Message("assistant", "try lpstat")])
    notes = home / "notes"
    notes.mkdir()
    (notes / "groceries.txt").write_text("oat milk\nbasil\n", encoding="utf-8")
    (notes / "wifi.txt").write_text("the router is in the hall 番茄", encoding="utf-8")


def test_hook_doctor_checks(tmp_path: Path) -> None:
    """A third-party plugin's checks appear in doctor --json next to the built-ins', labelled."""
    home = tmp_path / "home"
    home.mkdir()
    _plugin(home, "notes", NOTES_PLUGIN)
    result = _invoke(home, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert checks["notes folder"] == {
        "name": "notes folder", "ok": True, "warning": True, "plugin": "notes",
        "detail": f"{home / 'notes'}: 0 note(s)", "fix": "write a note first"}
    # the built-in stores answer through the same hook
    assert checks["state.db"]["plugin"] == "session_archive"
    assert checks["MEMORY.md"]["plugin"] == "file_memory"
    assert "plugin" not in checks["home"] and "plugin" not in checks["config"]
    _fill(home)
    text = _invoke(home, "doctor").output
    assert f"[ok  ] notes / notes folder: {home / 'notes'}: 2 note(s)" in text
    assert "session_archive / state.db:" in text and "1 sessions" in text
    assert _invoke(home, "plugins", "disable", "notes").exit_code == 0
    names = [c["name"] for c in json.loads(_invoke(home, "doctor", "--json").output)]
    assert "notes folder" not in names and "state.db" in names


def test_raising_hanging_and_wrong_doctor_checks_are_failed_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    release = tmp_path / "release"
    _plugin(home, "raiser", '''
        from hermes_core import hookimpl

        @hookimpl
        def doctor_checks(home, config):
            raise OSError("vault index unreadable")
        ''')
    _plugin(home, "sleeper", f'''
        import time
        from pathlib import Path
        from hermes_core import hookimpl

        @hookimpl
        def doctor_checks(home, config):
            deadline = time.monotonic() + 60  # a bound: the test releases it at its end
            while not Path({str(release)!r}).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            return []
        ''')
    _plugin(home, "wrongtype", '''
        from hermes_core import hookimpl

        @hookimpl
        def doctor_checks(home, config):
            return [{"name": "not a DoctorCheck"}]
        ''')
    _plugin(home, "notes", NOTES_PLUGIN)
    # the hook's deadline, short for this test (the default is in config.DEFAULT_HOOK_TIMEOUTS)
    monkeypatch.setitem(config_module.DEFAULT_HOOK_TIMEOUTS, "doctor_checks", 3.0)
    try:
        result = _invoke(home, "doctor", "--json")
        assert result.exit_code == 1
        checks = {c["name"]: c for c in json.loads(result.output)}
        raised = checks["raiser: doctor_checks"]
        assert not raised["ok"] and raised["plugin"] == "raiser"
        assert raised["detail"] == ("plugin 'raiser': its doctor_checks hook raised OSError: "
                                    "vault index unreadable")
        assert "hermes-core plugins disable raiser" in raised["fix"]
        late = checks["sleeper: doctor_checks"]
        assert not late["ok"] and "did not answer within 3 s" in late["detail"]
        wrong = checks["wrongtype: doctor_checks"]
        assert not wrong["ok"] and "DoctorCheck" in wrong["detail"] and "dict" in wrong["detail"]
        # the others still ran: the kernel's checks and the plugins that answered
        assert checks["home"]["ok"] and checks["notes folder"]["plugin"] == "notes"
        assert "state.db" in checks
        text = _invoke(home, "doctor").output
        assert "[FAIL] raiser: doctor_checks: plugin 'raiser': its doctor_checks hook raised" in text
    finally:
        release.touch()


def _notes_in_database(url: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(url) as con:
        return dict(con.execute("SELECT name, body FROM notes_entries").fetchall())


def test_hook_copy_storage(tmp_path: Path, pg_url: str) -> None:
    """A third-party store is migrated like the built-ins: counted, re-runnable, and back."""
    home = tmp_path / "home"
    home.mkdir()
    _plugin(home, "notes", NOTES_PLUGIN)
    _fill(home)
    before = {p.name: p.read_bytes() for p in (home / "notes").iterdir()}
    result = _invoke(home, "storage", "migrate", "--to", pg_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["plugins"]["notes"] == {
        "copied": {"notes": 2}, "skipped": {"notes": 0},
        "lines": ["2 note(s) copied, 0 already there"],
        "detail": {"copied": ["groceries", "wifi"]}}
    assert report["copied"]["notes"] == 2 and report["copied"]["sessions"] == 1
    assert report["errors"] == []
    assert _notes_in_database(pg_url) == {"groceries": "oat milk\nbasil\n",
                                          "wifi": "the router is in the hall 番茄"}
    assert {p.name: p.read_bytes() for p in (home / "notes").iterdir()} == before
    # its schema is a component like the built-ins'
    shown = json.loads(_invoke(home, "storage", "show", "--json", url=pg_url).output)
    assert shown["schema"]["notes"] == 1
    # run again: nothing copied twice, nothing overwritten
    (home / "notes" / "wifi.txt").write_text("changed here", encoding="utf-8")
    text = _invoke(home, "storage", "migrate", "--to", pg_url).output
    assert "\nnotes:\n  0 note(s) copied, 2 already there\n" in text
    assert "\nsession_archive:\n  copied 0 session(s), 0 message(s); 1 already there\n" in text
    assert _notes_in_database(pg_url)["wifi"] == "the router is in the hall 番茄"
    # the way back, into an empty home with the plugin installed
    back = tmp_path / "back"
    back.mkdir()
    _plugin(back, "notes", NOTES_PLUGIN)
    returned = json.loads(_invoke(back, "storage", "migrate", "--from", pg_url, "--json").output)
    assert returned["copied"]["notes"] == 2 and returned["copied"]["sessions"] == 1
    assert (back / "notes" / "groceries.txt").read_bytes() == before["groceries.txt"]


def test_a_failing_copy_names_the_plugin_and_leaves_the_source_intact(
    tmp_path: Path, pg_url: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _fill(home)
    _plugin(home, "notes", NOTES_PLUGIN)
    _plugin(home, "vault", '''
        from hermes_core import hookimpl

        @hookimpl
        def copy_storage(source, target, progress):
            progress("secrets", 0, 3)
            raise PermissionError("vault/keys.db: permission denied; run as the vault's owner")
        ''')
    before = {p.name: p.read_bytes() for p in (home / "notes").iterdir()}
    result = _invoke(home, "storage", "migrate", "--to", pg_url)
    assert result.exit_code == 1
    assert ("error: plugin 'vault' could not copy its store: PermissionError: vault/keys.db: "
            "permission denied; run as the vault's owner. Its source data was only read and is "
            "intact") in result.output
    assert "Now set storage.url" not in result.output
    # the other plugins copied theirs, and the source is as it was
    assert "notes:\n  2 note(s) copied" in result.output
    assert {p.name: p.read_bytes() for p in (home / "notes").iterdir()} == before
    with SessionArchive(home / "state.db") as archive:
        assert [m.content for m in archive.messages("s1")] == [
            "the printer shows E42", "try lpstat"]
    as_json = _invoke(home, "storage", "migrate", "--to", pg_url, "--json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.stdout)
    assert [e["plugin"] for e in report["errors"]] == ["vault"]
    assert report["skipped"]["notes"] == 2 and "vault" not in report["plugins"]
    assert report["not_loaded"] == []


def test_a_plugin_that_cannot_load_is_named_by_migrate(tmp_path: Path, pg_url: str) -> None:
    """Its store (if any) is not copied: the command says so instead of passing over it."""
    home = tmp_path / "home"
    home.mkdir()
    _fill(home)
    _plugin(home, "halfdone", "raise ImportError('needs the vaultdb package')\n")
    result = _invoke(home, "storage", "migrate", "--to", pg_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [r["plugin"] for r in report["not_loaded"]] == ["halfdone"]
    assert "needs the vaultdb package" in report["not_loaded"][0]["error"]
    assert "plugin 'halfdone' could not be loaded" in result.stderr
    assert "that store was not copied" in result.stderr
    assert report["copied"]["sessions"] == 1


def test_migrate_shows_one_progress_bar_per_plugin_task(tmp_path: Path, pg_url: str) -> None:
    """On a terminal (forced here), each plugin's task gets its bar, labelled with the plugin."""
    home = tmp_path / "home"
    home.mkdir()
    _plugin(home, "notes", NOTES_PLUGIN)
    _fill(home)
    env = {"HERMES_CORE_HOME": str(home), "HERMES_CORE_STORAGE_URL": "", "TTY_COMPATIBLE": "1",
           "COLUMNS": "120"}
    result = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "notes: notes" in result.stderr and "2/2" in result.stderr
    assert "session_archive: sessions" in result.stderr and "1/1" in result.stderr
    assert "notes: notes" not in result.stdout  # the bars go to stderr, the report to stdout
    quiet = CliRunner().invoke(cli, ["storage", "migrate", "--to", pg_url, "--json"], env=env)
    assert "notes: notes" not in quiet.stderr and json.loads(quiet.stdout)["errors"] == []


def test_reports_merge_by_kind_and_a_wrong_answer_is_an_error() -> None:
    from hermes_core.hooks import HookOutcome
    from hermes_core.storage.transfer import CopyReport, merge_reports

    merged = merge_reports([
        HookOutcome("a", CopyReport(copied={"notes": 2, "tags": 1}, skipped={"notes": 1})),
        HookOutcome("b", CopyReport(copied={"notes": 3})),
        HookOutcome("c", None),  # keeps no store
        HookOutcome("d", error=TypeError("return a hermes_core.storage.transfer.CopyReport or "
                                         "None, not dict"), status="bad_return"),
    ])
    assert merged["copied"] == {"notes": 5, "tags": 1} and merged["skipped"] == {"notes": 1}
    assert list(merged["plugins"]) == ["a", "b"]
    assert [(e["plugin"], e["error"]) for e in merged["errors"]] == [
        ("d", "TypeError: return a hermes_core.storage.transfer.CopyReport or None, not dict")]
    with pytest.raises(ValueError, match="count"):
        CopyReport(copied={"notes": -1})
    with pytest.raises(ValueError, match="sequence of str"):
        CopyReport(lines="one line")
