"""``replay`` and ``eval`` run in a scratch home holding a copy of config.yaml: an error in the
config names the user's own file and its line, never the throwaway copy."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [
    ["replay", str(ROOT / "examples" / "first-week.jsonl")],
    ["eval", str(ROOT / "examples" / "eval" / "hermes-mini.json"), "--limit", "1"],
])
@pytest.mark.parametrize("text, line", [
    ("memory:\n  providers: [file_memory]\ncontext:\n  enigne: compressor\n", 4),
    ("file_memory:\n  memory_char_limit: lots\n", 2),
])
def test_errors_name_the_users_config_file(home: Path, command: list[str], text: str,
                                           line: int) -> None:
    (home / "config.yaml").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, command)
    assert result.exit_code != 0
    assert f"{home / 'config.yaml'}, line {line}:" in result.output, result.output
    assert "hermes-core-replay-" not in result.output
    assert "hermes-core-eval-" not in result.output
