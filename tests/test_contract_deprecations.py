"""A plugin written against the previous release's documented forms (0.1: docs/reference/
platforms.md and context-engines.md before the typed Platform members and the engine hooks) keeps
working, with a DeprecationWarning naming the new form, shown by ``plugins list`` and ``doctor``."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core import deprecations
from hermes_core.cli import cli

OLD_PLUGIN = '''
import dataclasses
from hermes_core import ContextEngine, Platform, hookimpl
from hermes_core.types import CompressionResult


class OldPlatform(Platform):
    name = "oldplat"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.url = "http://127.0.0.1:9/old"
        self.secret_checked = False
        self.bound = None

    def secret(self):
        self.secret_checked = True

    def listen_on(self, host=None, port=None):
        self.bound = (host, port)


@dataclasses.dataclass
class Report:
    tokens_before: int
    tokens_after: int


class OldEngine(ContextEngine):
    name = "oldengine"
    overhead_tokens = 0
    turns = 0
    last_report = None

    def begin_turn(self):
        self.turns += 1

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        return len(messages) > 8

    @hookimpl
    def compress(self, messages, focus_topic=None, memory_context=""):
        self.last_report = Report(100, 10)
        return CompressionResult(messages=messages[-2:], summary="old")

    @hookimpl
    def update_from_response(self, usage):
        pass


@hookimpl
def register_platforms(register):
    register(OldPlatform)


@hookimpl
def register_context_engines(register):
    register(OldEngine)
'''


@pytest.fixture
def old_module(home: Path, dir_plugin):
    dir_plugin("oldstyle", OLD_PLUGIN)
    return home


def _load(home: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("oldstyle_direct",
                                                  home / "plugins" / "oldstyle" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_platform_setting_self_url_starts_with_a_warning(old_module: Path) -> None:
    mod = _load(old_module)
    with pytest.warns(DeprecationWarning, match="override the `url` property"):
        platform = mod.OldPlatform(config=None, context=None)
    assert platform.url == "http://127.0.0.1:9/old"
    with pytest.warns(DeprecationWarning, match="listens = True"):
        assert deprecations.platform_listens(platform)
    with pytest.warns(DeprecationWarning, match="rename it check_ready"):
        deprecations.check_platform_ready(platform)
    assert platform.secret_checked


def test_an_engines_old_attributes_are_still_used(old_module: Path) -> None:
    mod = _load(old_module)
    engine = mod.OldEngine(config=None, context=None)
    with pytest.warns(DeprecationWarning, match="on_turn_start"):
        deprecations.engine_turn_start(engine)
    with pytest.warns(DeprecationWarning, match="on_prompt_assembled"):
        deprecations.engine_overhead(engine, 321)
    assert engine.turns == 1 and engine.overhead_tokens == 321
    engine.compress([], None, "")
    with pytest.warns(DeprecationWarning, match=r"CompressionResult\(report=...\)"):
        report = deprecations.engine_last_report(engine)
    assert report == dataclasses.asdict(mod.Report(100, 10))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_compaction_record_keeps_an_old_engines_report(old_module: Path) -> None:
    (old_module / "config.yaml").write_text("context:\n  engine: oldengine\n", encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    result = CliRunner().invoke(cli, ["replay", str(root / "examples" / "first-week.jsonl"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    turns = json.loads(result.output[result.output.index("{"):])["turns"]
    compactions = [c for t in turns for c in t["compactions"]]
    assert compactions and all(c["engine_report"] == {"tokens_before": 100, "tokens_after": 10}
                               for c in compactions)


def test_plugins_list_and_doctor_show_the_deprecations(old_module: Path) -> None:
    listed = CliRunner().invoke(cli, ["plugins", "list", "--json"])
    record = next(r for r in json.loads(listed.output) if r["name"] == "oldstyle")
    text = "\n".join(record["warnings"])
    for needle in ("sets self.url", "rename it check_ready", "listens = True",
                   "on_turn_start", "on_prompt_assembled", "CompressionResult(report=...)"):
        assert needle in text, text
    assert record["error"] is None and "works until 0.3" in text
    doctor = CliRunner().invoke(cli, ["doctor"])
    assert "oldstyle: warning: OldPlatform sets self.url" in doctor.output, doctor.output
    shown = CliRunner().invoke(cli, ["plugins", "list"])
    assert "warning: " in shown.output and "rename it check_ready" in textwrap.dedent(shown.output)
