"""Commands that used to surprise a new user: each now names what is wrong and the fix."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_config_validate_lists_the_real_keys_and_a_did_you_mean(home: Path) -> None:
    (home / "config.yaml").write_text("context:\n  enigne: compressor\n", encoding="utf-8")
    result = _run("config", "validate")
    assert result.exit_code == 1
    assert ("unknown key 'context.enigne' (did you mean 'engine'?); allowed keys here: engine"
            in result.output), result.output


def test_context_estimate_refuses_a_misspelled_key(home: Path, tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    history.write_text('{"role": "user", "content": "hi"}\n', encoding="utf-8")
    (home / "config.yaml").write_text("file_memory:\n  memory_char_limt: 5\n", encoding="utf-8")
    result = _run("context", "estimate", str(history))
    assert result.exit_code == 1
    assert "did you mean 'memory_char_limit'?" in result.output, result.output


def test_plugins_enable_an_unknown_name_fails(home: Path) -> None:
    result = _run("plugins", "enable", "filememory")
    assert result.exit_code == 1
    assert "no plugin named 'filememory'. Did you mean 'file_memory'?" in result.output
    assert not (home / "config.yaml").exists()  # nothing written


def test_memory_pin_points_at_the_other_store(home: Path) -> None:
    assert _run("memory", "add", "--target", "user", "Lives in Porto").exit_code == 0
    result = _run("memory", "pin", "Porto")
    assert result.exit_code == 1
    assert "it is in USER.md: add --target user" in result.output, result.output


MISSPELLED = '''
from hermes_core import hookimpl


class Recall:
    name = "recall"

    def __init__(self, config, context):
        pass

    @hookimpl
    def prefech(self, query, session):
        return "never called"


@hookimpl
def register_memory_providers(register):
    register(Recall)
'''


def test_plugins_list_shows_the_active_stack_and_a_misspelled_hook(home: Path,
                                                                  dir_plugin) -> None:
    dir_plugin("recaller", MISSPELLED)
    listed = json.loads(_run("plugins", "list", "--json").output)
    by_name = {r["name"]: r for r in listed}
    assert "did you mean" in (by_name["recaller"]["error"] or ""), by_name["recaller"]
    assert by_name["compressor"]["active"] == ["context-engine:compressor"]
    assert by_name["lossless"]["active"] == []
    text = _run("plugins", "list").output
    assert "active: context engine compressor (context.engine)" in text
    assert "recaller" in text and "error" in text.split("recaller", 1)[1].splitlines()[0]
