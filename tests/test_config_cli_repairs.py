"""config.yaml mistakes the commands must name clearly, without printing a secret, and let the
user repair with the commands themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

SECRET_1 = "sk-ant-api03-FIRSTFIRSTFIRSTFIRST1"
SECRET_2 = "sk-ant-api03-SECONDSECONDSECONDSE2"


def test_a_key_given_twice_is_named_with_both_lines_and_no_value(run, home: Path):
    """Loading keeps the last value (YAML's rule); validate said the file was valid while
    config set refused it as malformed YAML, quoting both lines with their secrets."""
    path = home / "config.yaml"
    path.write_text(f"llm:\n  api_key: {SECRET_1}\n  api_key: {SECRET_2}\n", encoding="utf-8")
    before = path.read_bytes()
    for args in (("config", "validate"), ("config", "set", "llm.model", "x"),
                 ("config", "unset", "llm.api_key")):
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


def test_set_and_unset_can_repair_an_invalid_core_value(run, home: Path):
    """The error names llm.max_tokens; the commands that change it must not refuse the fix."""
    path = home / "config.yaml"
    path.write_text("# my settings\nllm:\n  max_tokens: abc\n  model: m1\n", encoding="utf-8")
    before = path.read_bytes()
    unrelated = run("config", "set", "llm.model", "m2")
    assert unrelated.exit_code == 1 and "llm.max_tokens" in unrelated.output
    assert "config.yaml was not changed" in unrelated.output, unrelated.output
    assert "hermes-core config unset KEY" in unrelated.output, unrelated.output
    still_bad = run("config", "set", "llm.max_tokens", "--", "-1")
    assert still_bad.exit_code == 1 and "greater than 0" in still_bad.output, still_bad.output
    assert path.read_bytes() == before
    fixed = run("config", "set", "llm.max_tokens", "2048")
    assert fixed.exit_code == 0, fixed.output
    text = path.read_text(encoding="utf-8")
    assert "max_tokens: 2048" in text and "# my settings" in text and "model: m1" in text
    assert run("config", "get", "llm.max_tokens").output.strip() == "2048"

    path.write_text("llm:\n  timeout: never\n", encoding="utf-8")
    unset = run("config", "unset", "llm.timeout")
    assert unset.exit_code == 0, unset.output
    assert run("config", "validate").exit_code == 0


def test_a_plugin_problem_already_there_does_not_block_the_repair(run, home: Path):
    path = home / "config.yaml"
    path.write_text("llm:\n  max_tokens: abc\nsession_archive:\n  busy_timeout: -1\n",
                    encoding="utf-8")
    fixed = run("config", "set", "llm.max_tokens", "10")
    assert fixed.exit_code == 0, fixed.output
    assert "max_tokens: 10" in path.read_text(encoding="utf-8")
    report = run("config", "validate")
    assert report.exit_code == 1 and "session_archive.busy_timeout" in report.output
    assert "llm.max_tokens" not in report.output


def test_a_section_that_is_not_a_mapping_is_repaired_by_the_command_it_names(run, home: Path):
    path = home / "config.yaml"
    path.write_text("memory: 3\n", encoding="utf-8")
    refused = run("config", "set", "memory.providers", "[file_memory]")
    assert refused.exit_code == 1 and "hermes-core config unset memory" in refused.output
    assert path.read_text(encoding="utf-8") == "memory: 3\n"
    assert run("config", "unset", "memory").exit_code == 0
    assert run("config", "set", "memory.providers", "[file_memory]").exit_code == 0
    assert run("config", "get", "memory.providers").output.split() == ["[", '"file_memory"', "]"]


def test_unsetting_a_key_that_is_not_set_says_so_and_writes_nothing(run, home: Path):
    path = home / "config.yaml"
    missing = run("config", "unset", "llm.model")
    assert missing.exit_code == 0 and "not set" in missing.output, missing.output
    assert not path.exists()
    path.write_text("", encoding="utf-8")
    assert "not set" in run("config", "unset", "llm.model").output
    path.write_text("# mine\nllm:\n  model: m1\n", encoding="utf-8")
    for key in ("llm.modle", "nosuch.key", "llm.model.deeper"):
        result = run("config", "unset", key)
        assert "Unset" not in result.output and "not set" in result.output, (key, result.output)
    assert path.read_text(encoding="utf-8") == "# mine\nllm:\n  model: m1\n"
    done = run("config", "unset", "llm.model")
    assert done.exit_code == 0 and done.output.startswith("Unset llm.model")


def test_set_writes_through_a_symlinked_config(run, home: Path, tmp_path: Path):
    """A config.yaml that is a link (to a dotfiles repository, say) stays a link: the edit goes to
    the file it points to (it used to replace the link with a copy, the real file unchanged)."""
    real = tmp_path / "dotfiles" / "hermes.yaml"
    real.parent.mkdir()
    real.write_text("# managed\nllm:\n  model: m1\n", encoding="utf-8")
    link = home / "config.yaml"
    link.symlink_to(real)
    assert run("config", "set", "llm.model", "m2").exit_code == 0
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert real.read_text(encoding="utf-8") == "# managed\nllm:\n  model: m2\n"
    assert run("config", "unset", "llm.model").exit_code == 0
    assert link.is_symlink() and "model" not in real.read_text(encoding="utf-8")


def test_a_plugin_is_disabled_and_enabled_whatever_else_is_wrong(run, home: Path, dir_plugin):
    """plugins disable parsed the whole config: with an unrelated bad core value the user could
    not disable a crashing plugin before repairing that value. It edits plugins.disabled only,
    so it works, writes nothing else, and names what is still wrong."""
    dir_plugin("crashy", "raise RuntimeError('boom at import')\n")
    path = home / "config.yaml"
    path.write_text("# mine\nllm:\n  max_tokens: abc\nmemory: 3\n", encoding="utf-8")
    off = run("plugins", "disable", "crashy")
    assert off.exit_code == 0, off.output
    assert "Disabled crashy" in off.output, off.output
    assert "llm.max_tokens" in off.output and "'memory'" in off.output, off.output
    assert "Traceback" not in off.output
    text = path.read_text(encoding="utf-8")
    assert text == "# mine\nllm:\n  max_tokens: abc\nmemory: 3\nplugins:\n  disabled:\n    - crashy\n"
    assert "already disabled" in run("plugins", "disable", "crashy").output
    on = run("plugins", "enable", "crashy")
    assert on.exit_code == 0 and "Enabled crashy" in on.output, on.output
    assert "llm.max_tokens" in on.output, on.output
    assert "max_tokens: abc" in path.read_text(encoding="utf-8")
    assert run("config", "validate").exit_code == 1  # loading is as strict as it was


def test_a_bad_plugins_disabled_value_is_replaced_by_disable(run, home: Path):
    path = home / "config.yaml"
    path.write_text("plugins:\n  disabled: 3\n", encoding="utf-8")
    off = run("plugins", "disable", "todo")
    assert off.exit_code == 0, off.output
    assert "plugins.disabled" not in off.output.split("Disabled", 1)[1], off.output
    assert run("config", "get", "plugins.disabled").output.split() == ["[", '"todo"', "]"]
    assert run("config", "validate").exit_code == 0


def test_a_malformed_config_is_not_touched_by_disable(run, home: Path):
    path = home / "config.yaml"
    path.write_text("llm: [unclosed\n", encoding="utf-8")
    off = run("plugins", "disable", "todo")
    assert off.exit_code == 1 and "malformed YAML" in off.output, off.output
    assert "Traceback" not in off.output
    assert path.read_text(encoding="utf-8") == "llm: [unclosed\n"
