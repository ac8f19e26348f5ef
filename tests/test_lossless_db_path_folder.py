"""lossless.db_path naming a folder: the error names the setting and the folder (it said
'OperationalError: unable to open database file')."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from hermes_core.cli import cli

TRANSCRIPT = Path(__file__).resolve().parents[1] / "examples" / "first-week.jsonl"


def test_a_db_path_that_is_a_folder_is_named(home: Path) -> None:
    (home / "archive").mkdir(parents=True)
    (home / "config.yaml").write_text(
        "context:\n  engine: lossless\nlossless:\n  db_path: archive\n", encoding="utf-8")
    runner = CliRunner()
    for args in (["context", "estimate", str(TRANSCRIPT)],):
        result = runner.invoke(cli, args)
        assert result.exit_code == 1, (args, result.output)
        assert "lossless.db_path" in result.output and str(home / "archive") in result.output, (
            args, result.output)
        assert "folder" in result.output and "unable to open" not in result.output, result.output
