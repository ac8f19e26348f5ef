"""A read-only home (issue 17 item 9): reading commands work, nothing advises discarding data.

The home is made read-only for real: every file 0444 and every folder 0555, and the commands run
in a subprocess. Root ignores permission bits, so as root the subprocess runs with the
capabilities that let it do so (DAC override) removed from its bounding set (``setpriv``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.types import Message, Session


def _prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a folder read-only")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner"]


@pytest.fixture
def readonly_home(home: Path) -> Iterator[Path]:
    with SessionArchive(home / "state.db") as archive:
        archive.open_session(Session(id="s1", title="Deploy notes"))
        archive.append_message("s1", Message("user", "the deploy needs the staging keys"))
        archive.append_message("s1", Message("assistant", "noted: staging keys for the deploy"))
    (home / "config.yaml").write_text("compression:\n  threshold: 0.6\n", encoding="utf-8")
    memories = home / "memories"
    memories.mkdir()
    (memories / "MEMORY.md").write_text("fact one\n§\nfact two\n", encoding="utf-8")
    for root, dirs, files in os.walk(home):
        for name in files:
            os.chmod(Path(root) / name, 0o444)
        for name in dirs:
            os.chmod(Path(root) / name, 0o555)
    os.chmod(home, 0o555)
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    yield home
    after = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert after == before  # nothing was created, changed or removed
    for root, dirs, _files in os.walk(home):
        os.chmod(root, 0o755)
        for name in dirs:
            os.chmod(Path(root) / name, 0o755)


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    return subprocess.run([*_prefix(), sys.executable, "-m", "hermes_core", *args],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def test_sessions_list_show_and_search_work_in_a_read_only_home(readonly_home: Path) -> None:
    listed = run(readonly_home, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["id"] for s in json.loads(listed.stdout)] == ["s1"]
    found = run(readonly_home, "sessions", "search", "staging", "--json")
    assert found.returncode == 0, found.stderr
    assert {h["session_id"] for h in json.loads(found.stdout)["hits"]} == {"s1"}
    shown = run(readonly_home, "sessions", "show", "s1")
    assert shown.returncode == 0 and "staging keys" in shown.stdout


def test_doctor_never_advises_moving_an_intact_archive_aside(readonly_home: Path) -> None:
    doctor = run(readonly_home, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    archive = checks["state.db"]
    assert archive["ok"] and "integrity ok" in archive["detail"], archive
    assert "move" not in json.dumps(checks).lower()
    assert checks["home"]["ok"] is False  # the home really is not writable: that is reported


def test_config_set_in_a_read_only_home_is_a_clear_error(readonly_home: Path) -> None:
    result = run(readonly_home, "config", "set", "compression.threshold", "0.7")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "cannot write" in result.stderr and "Nothing was changed" in result.stderr
