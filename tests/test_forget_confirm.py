"""``forget`` asks before deleting: the plan's counts, then a yes/no question on a real terminal
(a pty); ``--yes`` is required without one; a subject matching most of a store needs ``--force``.
A refused or declined forget leaves every file as it was."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from test_forget import seed_everything

from hermes_core.cli import cli
from hermes_core.plugins.memory.session_archive import SessionArchive
from hermes_core.types import Message, Session


def _snapshot(home: Path) -> dict[str, bytes]:
    """The memory files and skills (the archive is counted apart)."""
    return {str(p): p.read_bytes() for folder in ("memories", "skills")
            for p in sorted((home / folder).rglob("*")) if p.is_file()}


def _archived(home: Path) -> int:
    with SessionArchive(home / "state.db") as archive:
        return int(archive.db.read("SELECT count(*) FROM messages", ())[0][0])


def test_without_a_terminal_yes_is_required(home: Path) -> None:
    seed_everything(home)
    before, messages = _snapshot(home), _archived(home)
    result = CliRunner().invoke(cli, ["forget", "Lisbon"])
    assert result.exit_code == 1
    assert "would delete 4 item(s)" in result.output and "--yes" in result.output
    assert _snapshot(home) == before and _archived(home) == messages


def _in_a_terminal(home: Path, answer: str) -> str:
    """Run ``hermes-core forget Lisbon`` on a real pty, answer the question, return the screen."""
    primary, secondary = os.openpty()
    env = {**os.environ, "HERMES_CORE_HOME": str(home), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "hermes_core", "forget", "Lisbon"],
                            stdin=secondary, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    screen, answered = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(primary, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
            if not answered and b"cannot be undone" in screen:
                os.write(primary, answer.encode() + b"\n")
                answered = True
            if proc.poll() is not None and not ready:
                break
        assert proc.wait(timeout=30) == 0, screen.decode(errors="replace")
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
    return screen.decode(errors="replace")


def test_a_terminal_shows_the_counts_and_no_keeps_everything(home: Path) -> None:
    seed_everything(home)
    before, messages = _snapshot(home), _archived(home)
    screen = _in_a_terminal(home, "n")
    assert "session_archive: would delete 2 of 5 item(s)" in screen
    assert "Delete these 4 item(s)? This cannot be undone" in screen
    assert "Nothing was deleted." in screen
    assert _snapshot(home) == before and _archived(home) == messages
    screen = _in_a_terminal(home, "y")
    assert "session_archive: deleted 2 item(s)" in screen and _archived(home) == 3


def test_a_subject_matching_most_of_the_archive_needs_force(home: Path) -> None:
    with SessionArchive(home / "state.db") as archive:
        for i in range(30):
            archive.append_message(Session(id=f"s{i % 3}"),
                                   Message("user", f"the note number {i}" if i < 24 else "hi"))
    (home / "config.yaml").write_text("memory:\n  providers: [session_archive]\n")
    refused = CliRunner().invoke(cli, ["forget", "the", "--yes"])
    assert refused.exit_code == 1
    assert "session_archive: 24 of 30 items (80%)" in refused.output
    assert "--force" in refused.output and _archived(home) == 30
    done = CliRunner().invoke(cli, ["forget", "the", "--yes", "--force"])
    assert done.exit_code == 0, done.output
    assert "session_archive: deleted 24 item(s)" in done.output and _archived(home) == 6
