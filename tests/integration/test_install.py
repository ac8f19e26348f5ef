"""Real installs: throwaway plugin distributions pip-installed with `hermes-core plugins install`.

These tests change the interpreter they run in (that is the point of the command), so they run in
their own tox environment (`tox -e integration`), never in a developer's working venv by accident.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("HERMES_CORE_INTEGRATION") != "1",
    reason="installs packages into this interpreter; run with tox -e integration",
)

EXE = shutil.which("hermes-core", path=str(Path(sys.executable).parent)) or "hermes-core"


def make_project(root: Path, dist: str, module: str, source: str,
                 group: str = "hermes_core.plugins") -> Path:
    project = root / dist
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text(textwrap.dedent(source))
    (project / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{dist}"
        version = "0.3.1"

        [project.entry-points."{group}"]
        {module} = "{module}"
    """))
    return project


def hermes(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERMES_CORE_HOME": str(home)}
    env.pop("HERMES_CORE_DISABLE_PLUGINS", None)
    result = subprocess.run([EXE, *args], capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def listed(home: Path) -> dict[str, dict]:
    return {p["name"]: p for p in json.loads(hermes(home, "plugins", "list", "--json").stdout)}


def test_install_list_disable_uninstall(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "imported.txt"
    project = make_project(tmp_path, "hermes-core-throwaway", "hc_throwaway", f"""
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("imported")
        from hermes_core import ContextEngine, hookimpl

        class Tiny(ContextEngine):
            name = "tiny"

        @hookimpl
        def register_context_engines(register):
            register(Tiny)
    """)
    hermes(home, "plugins", "install", str(project))
    try:
        record = listed(home)["hc_throwaway"]
        assert record["source"] == "entry-point"
        assert record["distribution"] == "hermes-core-throwaway"
        assert record["version"] == "0.3.1"
        assert record["kinds"] == ["context-engine"] and record["error"] is None
        hermes(home, "config", "set", "context.engine", "tiny")
        assert hermes(home, "config", "get", "context.engine").stdout.strip() == "tiny"

        marker.unlink()
        hermes(home, "plugins", "disable", "hc_throwaway")
        assert not marker.exists()
        assert listed(home)["hc_throwaway"]["enabled"] is False
        assert not marker.exists(), "a disabled plugin must not be imported"
        hermes(home, "plugins", "enable", "hc_throwaway")
        assert listed(home)["hc_throwaway"]["enabled"] is True and marker.exists()
    finally:
        hermes(home, "plugins", "uninstall", "-y", "hc_throwaway")
    assert "hc_throwaway" not in listed(home)


def test_broken_plugin_is_listed_and_commands_still_work(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path, "hermes-core-broken", "hc_broken",
                           "raise RuntimeError('this plugin is broken on purpose')\n")
    hermes(home, "plugins", "install", str(project))
    try:
        record = listed(home)["hc_broken"]
        assert "RuntimeError" in record["error"] and "broken on purpose" in record["error"]
        assert record["distribution"] == "hermes-core-broken"
        for args in (["--help"], ["plugins", "list"], ["config", "show"], ["config", "validate"],
                     ["doctor"]):
            result = hermes(home, *args, check=False)
            # validate/doctor may fail for other reasons (no engine installed); never a crash
            assert "Traceback" not in result.stderr, (args, result.stderr)
        assert hermes(home, "plugins", "list").returncode == 0
        strict = subprocess.run([EXE, "plugins", "list"], capture_output=True, text=True,
                                env={**os.environ, "HERMES_CORE_HOME": str(home),
                                     "HERMES_CORE_STRICT_PLUGINS": "1"})
        assert strict.returncode == 1 and "broken on purpose" in strict.stderr
    finally:
        hermes(home, "plugins", "uninstall", "-y", "hermes-core-broken")


def test_uninstall_unknown_reports_pip_failure(tmp_path):
    result = hermes(tmp_path, "plugins", "install", str(tmp_path / "does-not-exist"), check=False)
    assert result.returncode == 1 and "pip install failed" in result.stderr


def test_a_plugin_in_a_misspelled_entry_point_group_is_named_at_install(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    project = make_project(tmp_path, "hermes-core-misgroup", "hc_misgroup", """
        from hermes_core import ContextEngine, hookimpl

        class Lost(ContextEngine):
            name = "lost"

        @hookimpl
        def register_context_engines(register):
            register(Lost)
    """, group="hermes_core.plugin")
    result = hermes(home, "plugins", "install", str(project), check=False)
    try:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "hermes-core-misgroup 0.3.1 declares entry points in the group " \
               "'hermes_core.plugin', not 'hermes_core.plugins'" in result.stderr
        assert "hc_misgroup" not in listed(home)
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q",
                        "hermes-core-misgroup"], check=True)
