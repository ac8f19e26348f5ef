"""A package from `plugins new` installs, is listed, is selectable, and its tests pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .test_install import EXE, hermes

pytestmark = pytest.mark.skipif(
    os.environ.get("HERMES_CORE_INTEGRATION") != "1",
    reason="installs packages into this interpreter; run with tox -e integration",
)


def test_generated_memory_plugin_end_to_end(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    hermes(home, "plugins", "new", "scaffolded-notes", "--kind", "memory", "--dir", str(tmp_path))
    root = tmp_path / "scaffolded-notes"
    hermes(home, "plugins", "install", str(root))
    try:
        listed = {p["name"]: p for p in json.loads(hermes(home, "plugins", "list", "--json").stdout)}
        record = listed["scaffolded_notes"]
        assert record["distribution"] == "hermes-core-scaffolded-notes"
        assert record["registers"] == ["memory-provider:scaffolded_notes"]
        assert record["error"] is None
        hermes(home, "config", "set", "memory.providers", "[scaffolded_notes]")
        assert json.loads(hermes(home, "config", "get", "memory.providers", "--json").stdout) == [
            "scaffolded_notes"]
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                             cwd=root, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
    finally:
        subprocess.run([EXE, "plugins", "uninstall", "-y", "hermes-core-scaffolded-notes"],
                       capture_output=True, env={**os.environ, "HERMES_CORE_HOME": str(home)})
