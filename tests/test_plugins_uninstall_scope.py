"""'plugins uninstall' removes hermes-core plugin distributions only: any other installed
distribution (a library, the kernel itself) is refused before pip is asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core import loader
from hermes_core.cli import cli


def test_a_distribution_that_is_not_a_plugin_is_refused(home: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    info = site / "plain_library-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plain-library\nVersion: 1.0\n",
                                   encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    loader.entry_points.cache_clear()
    runner = CliRunner()
    for args in (["plugins", "uninstall", "-y", "plain-library"],
                 ["plugins", "uninstall", "click"], ["plugins", "uninstall", "hermes-core-kernel"]):
        result = runner.invoke(cli, args, input="")
        assert result.exit_code == 1, (args, result.output)
        assert "not a hermes-core plugin" in result.output, (args, result.output)
        assert "pip uninstall failed" not in result.output
    loader.entry_points.cache_clear()
