"""The distribution as users get it: pip-installed, found by hermes-core through its entry point.

These run in ``tox -e honcho``, which pip-installs hermes-core-honcho beside hermes-core and sets
``HERMES_CORE_HONCHO_INSTALLED=1``; elsewhere they are skipped, since what an editable checkout has
installed says nothing about the real install.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("HERMES_CORE_HONCHO_INSTALLED") != "1",
    reason="needs the distribution pip-installed (tox -e honcho)",
)

EXE = shutil.which("hermes-core", path=str(Path(sys.executable).parent)) or "hermes-core"
PROJECT = Path(__file__).resolve().parents[1]


def hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HONCHO_")}
    env.update({"HERMES_CORE_HOME": str(home)})
    env.pop("HERMES_CORE_DISABLE_PLUGINS", None)
    return subprocess.run([EXE, *args], capture_output=True, text=True, env=env, timeout=300)


def honcho_record(home: Path) -> dict[str, object]:
    result = hermes(home, "plugins", "list", "--json")
    assert result.returncode == 0, result.stderr
    return next(p for p in json.loads(result.stdout) if p["name"] == "honcho")


def test_listed_from_its_own_distribution(tmp_path: Path) -> None:
    record = honcho_record(tmp_path)
    assert record["source"] == "entry-point"
    assert record["distribution"] == "hermes-core-honcho"
    assert record["version"] == "0.1.0"
    assert record["registers"] == ["memory-provider:honcho"] and record["error"] is None


def test_config_is_checked_through_the_installed_plugin(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("memory:\n  providers: [file_memory, honcho]\n"
                                          "honcho:\n  workspace: my-agent\n")
    result = hermes(tmp_path, "config", "validate")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "HONCHO_API_KEY" in result.stderr + result.stdout
    (tmp_path / "config.yaml").write_text("memory:\n  providers: [file_memory, honcho]\n"
                                          "honcho:\n  base_url: http://127.0.0.1:9\n")
    result = hermes(tmp_path, "config", "validate")
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_plugins_install_from_the_folder(tmp_path: Path) -> None:
    result = hermes(tmp_path, "plugins", "install", str(PROJECT))
    assert result.returncode == 0, result.stdout + result.stderr
    assert honcho_record(tmp_path)["distribution"] == "hermes-core-honcho"
