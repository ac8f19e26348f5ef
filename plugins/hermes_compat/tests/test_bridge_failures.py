"""Broken Hermes plugins and bad input: the turn and the other providers go on, and the reason
is named (in the replay's problems, ``plugins list`` warnings, ``doctor`` and the status
command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hermes_core_hermes_compat.plugin as bridge
import hermes_style
import pytest
from conftest import drop_folder_plugin, run
from hermes_core_hermes_compat import discovery

from hermes_core.config import parse_config_text
from hermes_core.errors import ConfigError, PluginError
from hermes_core.replay import RecordingHost

TURNS = [("I keep bees in Utrecht.", "Noted."), ("Where are my bees?", "Utrecht.")]


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hermes_core", *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300)


@pytest.mark.parametrize("mode", ["raise-init", "hang-prefetch"])
def test_broken_provider_leaves_the_turn_and_others_working(core_home: Path, mode: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "broken", hermes_style.BROKEN.format(mode=mode))
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    report = run(core_home, TURNS, providers=["hermes-broken", "hermes-recorder"],
                 monkeypatch=monkeypatch)
    assert [t["reply"] for t in report.turns] == ["Noted.", "Utrecht."]
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]  # the other provider recalls
    if mode == "raise-init":  # not raised again by every hook: reported once (see
        # test_bridge_lifecycle.py for the warning, doctor and the retry)
        assert not [p for t in report.turns for p in t["hook_problems"]
                    if "hermes-broken" in p["plugin"]]
    else:  # a first prefetch that never answers is "warming" for good: the turns do not wait
        # for it past part of the deadline, get nothing from it, and the reason is reported
        late = [p for t in report.turns for p in t["prefetch"] if p["provider"] == "hermes-broken"]
        assert late and all(not p["text"] for p in late), late
        assert any("broken" in line and "warming" in line for t in report.turns for line in t["log"])


def test_unimportable_plugin_is_skipped_and_named(core_home: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "unimportable", hermes_style.UNIMPORTABLE)
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    report = run(core_home, TURNS, providers=["hermes-unimportable", "hermes-recorder"],
                 monkeypatch=monkeypatch)
    assert report.providers == ["hermes-recorder"]
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]
    (core_home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, hermes-unimportable]\n", encoding="utf-8")
    doctor = cli("doctor", "--json")
    assert doctor.returncode == 1
    assert "a_module_nobody_installed" in doctor.stdout and "pip install" in doctor.stdout


def test_status_command(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    drop_folder_plugin(core_home, "unimportable", hermes_style.UNIMPORTABLE)
    drop_folder_plugin(core_home, "needs_hermes", hermes_style.NEEDS_HERMES)
    drop_folder_plugin(core_home, "keeplast", hermes_style.ENGINE.format())
    out = cli("hermes", "plugins", "--json")
    assert out.returncode == 0, out.stderr
    found = {p["name"]: p for p in json.loads(out.stdout)["plugins"]}
    assert found["hermes-recorder"]["status"] == "ready"
    assert found["hermes-recorder"]["skipped"] == []
    assert found["hermes-recorder"]["unmapped"] == [
        "transform_llm_output (no hermes-core hook may replace the reply text)",
        "ctx.register_skill('recorder-notes', ...): SKILL.md not found at SKILL.md (refused)"]
    assert found["hermes-keeplast"]["kind"] == "context-engine"
    assert found["hermes-keeplast"]["status"] == "ready"
    assert found["hermes-needs-hermes"]["status"] == "needs hermes-agent"
    assert "agent.context_compressor" in found["hermes-needs-hermes"]["detail"]
    bad = found["hermes-unimportable"]
    assert bad["status"] == "failed" and "a_module_nobody_installed" in bad["detail"] and bad["fix"]
    listed = cli("plugins", "list", "--json")
    assert "hermes-recorder" in listed.stdout


def test_bad_values_are_named_and_the_rest_kept(core_home: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "broken", hermes_style.BROKEN.format(mode="bad-values"))
    turns = [{"user": "go", "tool_calls": [{"name": "broken_plain", "arguments": {}}],
              "assistant": "done"}]
    report = run(core_home, turns, providers=["hermes-broken"], monkeypatch=monkeypatch)
    assert "broken_plain" in report.tools and "broken_array" not in report.tools
    call = report.turns[0]["tool_calls"][0]
    assert call["ok"] and call["result"] == "plain words, not JSON"
    assert report.turns[0]["prefetch"][0]["text"] == ""


def test_problems_reach_plugin_warnings(core_home: Path) -> None:
    drop_folder_plugin(core_home, "broken", hermes_style.BROKEN.format(mode="bad-values"))
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    loaded = parse_config_text("memory:\n  providers: [hermes-broken, hermes-recorder]\n",
                               core_home / "config.yaml")
    host = RecordingHost.load(core_home, config=loaded, entry_points=False, directories=False,
                              plugins=[("hermes_compat", bridge)])
    try:
        providers = host.activate_memory_providers()
        broken = providers[0]
        from hermes_core.types import Session

        assert broken.prefetch("q", Session("s1")) is None  # type: ignore[attr-defined]
        assert len(host.tools()) >= 3
        warnings = "\n".join(host.records["hermes_compat"].warnings)
        assert "prefetch() returned dict, not str" in warnings
        assert "cannot be expressed" in warnings and "broken_array" in warnings
        assert ("its register(ctx) call ctx.register_skill('recorder-notes', ...): SKILL.md not "
                "found at SKILL.md was refused") in warnings
        assert "its hook transform_llm_output (no hermes-core hook" in warnings
    finally:
        host.shutdown()


def test_config_section_checked_against_the_plugin_schema(core_home: Path) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    for section, expected in (("  greeting: howdy\n", "choose one of 'hi', 'hello'"),
                              ("  colour: blue\n", "unknown key 'colour'"),
                              ("  token: abc\n", "set the environment variable RECORDER_TOKEN")):
        loaded = parse_config_text(f"memory:\n  providers: [hermes-recorder]\nhermes-recorder:\n{section}",
                                   core_home / "config.yaml")
        host = RecordingHost.load(core_home, config=loaded, entry_points=False,
                                  directories=False, plugins=[("hermes_compat", bridge)])
        with pytest.raises((ConfigError, PluginError), match=expected):
            host.activate("memory-provider", "hermes-recorder", config_key="memory.providers[0]")
        host.shutdown()
    (core_home / "config.yaml").write_text(
        "memory:\n  providers: [hermes-recorder]\nhermes-recorder:\n  colour: blue\n", encoding="utf-8")
    out = cli("config", "validate")
    assert out.returncode != 0 and "unknown key 'colour'" in out.stdout + out.stderr


def test_name_clash_between_two_sources(core_home: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    hermes_home = tmp_path / "dot-hermes"
    (hermes_home / "plugins" / "memory" / "recorder").mkdir(parents=True)
    (hermes_home / "plugins" / "memory" / "recorder" / "__init__.py").write_text(
        hermes_style.SWITCHER, encoding="utf-8")
    monkeypatch.setenv("HERMES_CORE_HERMES_HOME", str(hermes_home))
    found = discovery.discover(core_home)
    assert [c.clash is None for c in found if c.name == "hermes-recorder"] == [True, False]
    clash = next(c.clash for c in found if c.clash)
    assert "already taken" in clash and str(core_home / "hermes-plugins" / "recorder") in clash
    out = cli("hermes", "plugins", "--json")
    statuses = [p["status"] for p in json.loads(out.stdout)["plugins"] if p["name"] == "hermes-recorder"]
    assert statuses == ["ready", "failed"]


def test_one_distribution_publishing_a_name_in_two_groups_is_one_plugin(
        core_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As hermes-okf does: its provider class under ``hermes.memory_providers`` and a general
    plugin (CLI commands only) under ``hermes_agent.plugins``, both named alike. The provider
    is listed, once, and runs; it is not reported as clashing with itself."""
    site = tmp_path / "site"
    (site / "twogroups").mkdir(parents=True)
    (site / "twogroups" / "__init__.py").write_text(
        hermes_style.SWITCHER.replace("def register(ctx):", "def register_provider(ctx):")
        + "\n\ndef register(ctx):\n    ctx.register_cli_command('twogroups', None)\n",
        encoding="utf-8")
    info = site / "twogroups-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: twogroups\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[hermes_agent.plugins]\ntwogroups = twogroups\n\n"
        "[hermes.memory_providers]\ntwogroups = twogroups:Switcher\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    discovery._entry_points.cache_clear()
    discovery._entry_point_candidates.cache_clear()
    try:
        found = [c for c in discovery.discover(core_home) if c.distribution == "twogroups"]
        assert [(c.name, c.group, c.clash) for c in found] == [
            ("hermes-twogroups", "hermes.memory_providers", None)]
        from hermes_core_hermes_compat.status import status_of

        assert status_of(found[0], core_home).status == "ready"
    finally:
        discovery._entry_points.cache_clear()
        discovery._entry_point_candidates.cache_clear()


def test_a_general_plugin_yields_its_name_to_a_provider(
        core_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As knos does: its own package publishes a general Hermes plugin (tools, a hook) named
    ``knos``, and knos-hermes installs the memory provider ``knos`` as a folder plugin. The
    provider gets the name; the general plugin is the one reported as clashing."""
    site = tmp_path / "site"
    (site / "generalknos").mkdir(parents=True)
    (site / "generalknos" / "__init__.py").write_text(
        "def register(ctx):\n    ctx.register_hook('pre_tool_call', print)\n", encoding="utf-8")
    info = site / "generalknos-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: generalknos\nVersion: 0.1\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text("[hermes_agent.plugins]\nrecorder = generalknos\n",
                                           encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    discovery._entry_points.cache_clear()
    discovery._entry_point_candidates.cache_clear()
    try:
        found = [c for c in discovery.discover(core_home) if c.name == "hermes-recorder"]
        assert [(c.source, c.clash is None) for c in found] == [("folder", True),
                                                                 ("entry-point", False)]
    finally:
        discovery._entry_points.cache_clear()
        discovery._entry_point_candidates.cache_clear()


def test_a_folder_provider_without_register_is_made_from_its_class(
        core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Hermes' memory provider folders may hold only a MemoryProvider subclass: Hermes makes the
    # first such class of the module, and so does the bridge
    classless = hermes_style.RECORDER.split("\ndef register(ctx):")[0]
    assert "def register" not in classless
    drop_folder_plugin(core_home, "bare", classless)
    report = run(core_home, TURNS, providers=["hermes-bare"], monkeypatch=monkeypatch)
    assert report.providers == ["hermes-bare"]
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]
    assert not [p for t in report.turns for p in t["hook_problems"]]


def test_a_folder_provider_class_that_cannot_be_made_is_named(
        core_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drop_folder_plugin(core_home, "stubborn", """
        from agent.memory_provider import MemoryProvider

        class Stubborn(MemoryProvider):
            name = "stubborn"

            def __init__(self, needed):
                self.needed = needed
        """)
    drop_folder_plugin(core_home, "recorder", hermes_style.RECORDER)
    report = run(core_home, TURNS, providers=["hermes-stubborn", "hermes-recorder"],
                 monkeypatch=monkeypatch)
    assert report.providers == ["hermes-recorder"]
    assert "Utrecht" in report.turns[1]["prefetch"][-1]["text"]
    (core_home / "config.yaml").write_text(
        "memory:\n  providers: [file_memory, hermes-stubborn]\n", encoding="utf-8")
    doctor = cli("doctor", "--json")
    assert doctor.returncode == 1
    assert "no register(ctx)" in doctor.stdout and "Stubborn() raised TypeError" in doctor.stdout
