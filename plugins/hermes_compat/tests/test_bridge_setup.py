"""``hermes-core setup`` offers the Hermes plugins the bridge finds (through the registry, as
``hermes-<name>``), writes a config selecting one that validates, and ``setup --check`` starts it."""

from __future__ import annotations

import json
from pathlib import Path

import hermes_style
import yaml
from click.testing import CliRunner
from conftest import drop_folder_plugin

from hermes_core.cli import cli


def test_setup_offers_and_selects_a_hermes_provider(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    runner = CliRunner()
    answers = ["anthropic", "", "-", "bogus", "hermes-recorder, session_archive", "none", "global"]
    result = runner.invoke(cli, ["setup"], input="\n".join(answers) + "\n")
    assert result.exit_code == 0, result.output
    offered = result.output.split("Memory providers:")[1]
    assert "hermes-recorder  (installed: hermes-core-hermes-compat" in offered
    assert "Hermes memory provider 'recorder'" in offered
    assert "unknown memory provider 'bogus'; valid: " in result.output
    data = yaml.safe_load((core_home / "config.yaml").read_text(encoding="utf-8"))
    assert data["memory"]["providers"] == ["hermes-recorder", "session_archive"]
    assert runner.invoke(cli, ["config", "validate"]).exit_code == 0
    check = runner.invoke(cli, ["setup", "--check", "--json"])
    activation = next(c for c in json.loads(check.stdout) if c["name"] == "activation")
    assert activation["ok"] is True, activation
