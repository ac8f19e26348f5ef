"""A memory provider still listed in memory.providers while its plugin is disabled is skipped with
a warning (docs/plugins.md: 'plugins disable skills' works with the default provider list);
config validate and doctor must say the same, not call the config invalid."""

from __future__ import annotations

import json
from pathlib import Path


def test_disabling_a_selected_provider_is_a_warning_of_validate_and_doctor(run, home: Path):
    assert run("plugins", "disable", "skills").exit_code == 0
    result = run("config", "validate", "--json")
    report = json.loads(result.output)
    assert result.exit_code == 0 and report["valid"], report
    assert any("'skills'" in w and "disabled" in w for w in report["warnings"]), report
    doctor = json.loads(run("doctor", "--json").output)
    checks = {c["name"]: c for c in doctor["checks"]} if isinstance(doctor, dict) else {
        c["name"]: c for c in doctor}
    assert checks["selections"]["ok"], checks["selections"]
    # a name no plugin provides is still an error, and so is a disabled engine (not skipped)
    assert run("config", "set", "memory.providers", "[file_memory, ghost]").exit_code == 1
    assert run("plugins", "disable", "compressor").exit_code == 0
    assert run("config", "validate").exit_code == 1


def test_the_allow_list_leaving_a_selected_provider_out_is_a_warning_too(run, home: Path):
    (home / "config.yaml").write_text(
        "plugins:\n  enabled_only: [file_memory, session_archive, compressor, anthropic, cli, "
        "memory_review]\n", encoding="utf-8")
    result = run("config", "validate", "--json")
    report = json.loads(result.output)
    assert result.exit_code == 0, report
    assert any("'skills'" in w for w in report["warnings"]), report


def test_selecting_a_disabled_plugins_provider_anew_is_still_refused(run, home: Path):
    (home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, session_archive]\nplugins:\n  disabled: [skills]\n",
        encoding="utf-8")
    before = (home / "config.yaml").read_text(encoding="utf-8")
    result = run("config", "set", "memory.providers", "[file_memory, session_archive, skills]")
    assert result.exit_code == 1 and "plugins enable skills" in result.output, result.output
    assert (home / "config.yaml").read_text(encoding="utf-8") == before
    # an unrelated change is not blocked by a skipped provider that was already there
    (home / "config.yaml").write_text("plugins:\n  disabled: [skills]\n", encoding="utf-8")
    assert run("config", "set", "llm.max_tokens", "100").exit_code == 0
