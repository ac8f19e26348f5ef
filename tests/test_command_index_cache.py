"""The plugin command index ($HERMES_CORE_HOME/cache/commands.json) is a cache: an index whose
shape this version does not know (another version wrote it, a disk error garbled it) is rebuilt,
never a traceback of every command, --help included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli

ENTRY = {"name": "eval", "plugin": "eval", "help": "h", "enabled": True}


@pytest.mark.parametrize("index", [
    {"commands": 5},
    {"commands": [5]},
    {"commands": [{"name": "eval"}]},
    {"commands": [{**ENTRY, "aliases": ["ev"]}]},  # a field a newer version added
    {"commands": [{**ENTRY, "name": 7}]},
    {"commands": [ENTRY], "asked": 3},
])
def test_a_malformed_index_is_rebuilt(home: Path, index: dict) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["sessions", "list"]).exit_code == 0  # writes the index
    cache = home / "cache" / "commands.json"
    assert cache.is_file()
    cache.write_text(json.dumps(index), encoding="utf-8")
    for args in (["--help"], ["sessions", "list"], ["plugins", "--help"], ["eval", "--help"]):
        result = runner.invoke(cli, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args, repr(result.exception))
        assert result.exit_code == 0, (args, result.output)
    listed = runner.invoke(cli, ["--help"]).output
    assert "sessions" in listed and "eval" in listed
    rebuilt = json.loads(cache.read_text(encoding="utf-8"))
    assert isinstance(rebuilt["commands"], list) and all(
        isinstance(e, dict) and isinstance(e["name"], str) for e in rebuilt["commands"])
