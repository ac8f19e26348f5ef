"""config.yaml mistakes the commands must name clearly, without printing a secret, and let the
user repair with the commands themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli

SECRET_1 = "sk-ant-api03-FIRSTFIRSTFIRSTFIRST1"
SECRET_2 = "sk-ant-api03-SECONDSECONDSECONDSE2"


@pytest.fixture
def run(home):
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


def test_a_key_given_twice_is_named_with_both_lines_and_no_value(run, home: Path):
    """Loading keeps the last value (YAML's rule); validate said the file was valid while
    config set refused it as malformed YAML, quoting both lines with their secrets."""
    path = home / "config.yaml"
    path.write_text(f"llm:\n  api_key: {SECRET_1}\n  api_key: {SECRET_2}\n", encoding="utf-8")
    before = path.read_bytes()
    for args in (("config", "validate"), ("config", "set", "llm.model", "x"),
                 ("config", "unset", "llm.model")):
        result = run(*args)
        assert result.exit_code == 1, (args, result.output)
        assert "FIRST" not in result.output and "SECOND" not in result.output, result.output
        assert "'llm.api_key'" in result.output and "line 3" in result.output, result.output
        assert "line 2" in result.output, result.output
        assert "Traceback" not in result.output
    assert path.read_bytes() == before
    shown = run("config", "show")
    assert shown.exit_code == 0 and "FIRST" not in shown.output and "SECOND" not in shown.output
    path.write_text(f"llm:\n  api_key: {SECRET_2}\n", encoding="utf-8")
    assert run("config", "set", "llm.model", "x").exit_code == 0


def test_the_editor_names_a_yaml_problem_without_the_values(home: Path):
    from hermes_core.config_edit import edit_config_text
    from hermes_core.errors import ConfigError

    path = home / "config.yaml"
    text = f"llm:\n  api_key: {SECRET_1}\n  api_key: {SECRET_2}\n"
    with pytest.raises(ConfigError) as caught:
        edit_config_text(text, path, "llm.model", "x")
    message = str(caught.value)
    assert "FIRST" not in message and "SECOND" not in message, message
    assert "'llm.api_key'" in message and "line 3" in message and "line 2" in message, message
    with pytest.raises(ConfigError) as caught:
        edit_config_text(f"llm:\n  api_key: [{SECRET_1}\n", path, "llm.model", "x")
    assert "FIRST" not in str(caught.value) and "malformed YAML" in str(caught.value)
