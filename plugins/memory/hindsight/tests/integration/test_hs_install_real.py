"""``hermes-core plugins install ./plugins/memory/hindsight``: found through its own distribution.

This reinstalls the plugin into the interpreter running the tests, so it runs only where that is
the point (``tox -e hindsight`` sets HINDSIGHT_INSTALL_TEST=1), never in a developer's venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2]
EXE = shutil.which("hermes-core", path=str(Path(sys.executable).parent)) or "hermes-core"

pytestmark = [
    pytest.mark.skipif(os.environ.get("HINDSIGHT_INSTALL_TEST") != "1",
                       reason="reinstalls the plugin into this interpreter; run with tox -e hindsight"),
    pytest.mark.slow,
]


def hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    result = subprocess.run([EXE, *args], capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


def test_plugins_install_lists_it_from_its_own_distribution(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    hermes(home, "plugins", "install", str(PLUGIN_DIR))
    listed = {p["name"]: p for p in json.loads(hermes(home, "plugins", "list", "--json").stdout)}
    record = listed["hindsight"]
    assert record["source"] == "entry-point" and record["error"] is None
    assert record["distribution"] == "hermes-core-hindsight" and record["version"] == "0.1.0"
    assert record["kinds"] == ["memory-provider"]
    # selectable by name, its config section validated by its own model
    (home / "config.yaml").write_text("memory:\n  providers: [file_memory, hindsight]\n"
                                      "hindsight:\n  bank: 'not a bank'\n")
    bad = subprocess.run([EXE, "config", "validate"], capture_output=True, text=True, check=False,
                         env={**os.environ, "HERMES_CORE_HOME": str(home)})
    assert bad.returncode != 0 and "bank 'not a bank' is invalid" in bad.stdout + bad.stderr
    assert "Traceback" not in bad.stderr
