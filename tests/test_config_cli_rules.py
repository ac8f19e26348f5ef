"""Config and plugin commands refuse bad input clearly (issue 17 item 14)."""

from __future__ import annotations

import json
from pathlib import Path

from hermes_core.host import PluginHost
from hermes_core.loader import Candidate, allowed_names, blocked_names, is_blocked


def config_text(home: Path) -> str:
    return (home / "config.yaml").read_text(encoding="utf-8")


def test_set_refuses_an_invalid_value_even_in_an_already_invalid_section(run, home):
    (home / "config.yaml").write_text("session_archive:\n  busy_timeout: -1\n", encoding="utf-8")
    before = config_text(home)
    other_key = run("config", "set", "session_archive.window_chars", "5")
    assert other_key.exit_code == 1 and "window_chars" in other_key.output
    assert "greater than or equal to 2000" in other_key.output
    same_key = run("config", "set", "session_archive.busy_timeout", "--", "-5")
    assert same_key.exit_code == 1 and "got -5" in same_key.output
    assert config_text(home) == before
    # a valid value for another key is still accepted (the old problem does not block it)
    fixed = run("config", "set", "session_archive.window_chars", "5000")
    assert fixed.exit_code == 0, fixed.output
    assert "window_chars: 5000" in config_text(home)


def test_validate_reports_every_error_not_only_the_first(run, home):
    (home / "config.yaml").write_text(
        "llm:\n  max_tokens: -1\n  timeout: 0\n"
        "session_archive:\n  busy_timeout: -1\n  window_chars: 5\n"
        "nosuchsection: 1\n"
        "context:\n  engine: nosuch\n", encoding="utf-8")
    result = run("config", "validate", "--json")
    assert result.exit_code == 1
    errors = json.loads(result.output)["errors"]
    joined = "\n".join(errors)
    for key in ("llm.max_tokens", "llm.timeout", "session_archive.busy_timeout",
                "session_archive.window_chars", "'nosuchsection'", "context engine 'nosuch'"):
        assert key in joined, (key, errors)
    assert len(errors) == 6 and all("\n" not in e for e in errors)


def test_validate_still_reports_malformed_yaml(run, home):
    (home / "config.yaml").write_text("llm: [unclosed\n", encoding="utf-8")
    result = run("config", "validate")
    assert result.exit_code == 1 and "malformed YAML" in result.output


def test_uninstall_an_unknown_name_exits_non_zero(run):
    result = run("plugins", "uninstall", "-y", "nosuch-plugin-xyz")
    assert result.exit_code == 1
    assert "no installed plugin or distribution named 'nosuch-plugin-xyz'" in result.output


def test_uninstall_without_yes_and_no_terminal_is_a_clear_refusal(run, fake_dist):
    fake_dist("hermes-core-removable", "1.0", {"removable": "removable_mod"},
              {"removable_mod": "X = 1\n"})
    result = run("plugins", "uninstall", "removable", input="")
    assert result.exit_code == 1
    assert "no terminal to ask on; pass -y" in result.output
    assert "Traceback" not in result.output


def test_enabled_only_is_an_allow_list_applied_before_import():
    allowed = allowed_names(["file_memory", "Hermes_Core-Honcho"])
    assert not is_blocked(Candidate("file_memory", "builtin"), set(), allowed)
    assert is_blocked(Candidate("compressor", "builtin"), set(), allowed)
    assert not is_blocked(Candidate("honcho", "entry-point", distribution="hermes-core-honcho"),
                          set(), allowed)
    # disabled still applies on top of the allow-list; unset means no allow-list
    assert is_blocked(Candidate("file_memory", "builtin"), blocked_names(["file_memory"]), allowed)
    assert allowed_names(None) is None
    assert not is_blocked(Candidate("compressor", "builtin"), set(), allowed_names(None))


def test_enabled_only_loads_only_the_listed_plugins(home):
    (home / "config.yaml").write_text(
        "plugins:\n  enabled_only: [file_memory, compressor]\n"
        "memory:\n  providers: [file_memory]\n", encoding="utf-8")
    host = PluginHost.load(home=home, entry_points=False)
    enabled = sorted(n for n, r in host.records.items() if r.enabled)
    assert enabled == ["compressor", "file_memory"]
    assert not host.records["webhook"].enabled
