"""What a machine without PostgreSQL's server binaries or tmux sees when it runs the tests.

Each case runs pytest in a subprocess on one real test that needs the program, with the program
hidden (``HERMES_CORE_PG_BIN`` pointing at an empty folder; ``PATH`` without tmux): by default
the run stops before any test with one message naming what is missing, how to install it and
how to skip instead; with the variable at "0" the test is skipped with that reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG_TEST = "tests/test_storage.py::test_wrong_password_is_a_clear_error"
TMUX_TEST = "tests/test_chat_tmux.py"


def _pytest(target: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("HERMES_CORE_TEST_PG_REQUIRED", "HERMES_CORE_TEST_TMUX_REQUIRED",
                         "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", target, "-q", "-rs",
                           "-p", "no:cacheprovider"], cwd=ROOT, env={**base, **env},
                          capture_output=True, text=True, timeout=300)


def test_missing_postgres_stops_the_run_with_how_to_fix(tmp_path: Path) -> None:
    run = _pytest(PG_TEST, {"HERMES_CORE_PG_BIN": str(tmp_path)})
    out = run.stdout + run.stderr
    assert run.returncode == 4, out  # a usage error: nothing ran, nothing passed as a skip
    assert "1 selected tests need PostgreSQL server binaries" in out
    assert "apt-get install postgresql" in out and "HERMES_CORE_TEST_PG_REQUIRED=0" in out


def test_skipped_only_when_explicitly_allowed(tmp_path: Path) -> None:
    run = _pytest(PG_TEST, {"HERMES_CORE_PG_BIN": str(tmp_path),
                            "HERMES_CORE_TEST_PG_REQUIRED": "0"})
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "1 skipped" in out and "PostgreSQL server binaries" in out


def test_missing_tmux_is_named_too(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    run = _pytest(TMUX_TEST, {"PATH": str(bare)})
    out = run.stdout + run.stderr
    assert run.returncode == 4, out
    assert "need tmux" in out and "HERMES_CORE_TEST_TMUX_REQUIRED=0" in out
    allowed = _pytest(TMUX_TEST, {"PATH": str(bare), "HERMES_CORE_TEST_TMUX_REQUIRED": "0"})
    assert allowed.returncode == 0 and "skipped" in allowed.stdout, allowed.stdout
