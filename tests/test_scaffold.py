"""`hermes-core plugins new`: each kind's generated package passes its own tests at once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.scaffold import ScaffoldError, scaffold


@pytest.mark.parametrize("kind", ["memory", "context-engine", "tool", "platform"])
def test_generated_package_tests_pass(kind, tmp_path, home):
    result = CliRunner().invoke(cli, ["plugins", "new", f"demo-{kind}", "--kind", kind,
                                      "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / f"demo-{kind}"
    assert (root / "pyproject.toml").read_text().count('[project.entry-points."hermes_core.plugins"]') == 1
    # the generated tests import the package from src/ (the install path is covered by
    # tests/integration/test_scaffold_install.py)
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                         cwd=root, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " passed" in run.stdout and "failed" not in run.stdout


@pytest.mark.parametrize(("name", "fragment"), [("Bad Name", "invalid"), ("class", "keyword")])
def test_bad_names(name, fragment, tmp_path):
    with pytest.raises(ScaffoldError, match=fragment):
        scaffold(name, "memory", tmp_path)


def test_refuses_to_overwrite(tmp_path, home):
    scaffold("twice", "tool", tmp_path)
    result = CliRunner().invoke(cli, ["plugins", "new", "twice", "--kind", "tool",
                                      "--dir", str(tmp_path)])
    assert result.exit_code == 1 and "already exists" in result.output
