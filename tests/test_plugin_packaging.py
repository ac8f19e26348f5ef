"""Plugin distributions carry a LICENSE, py.typed and classifiers: the two third-party-style
ones in plugins/memory/ and every package ``plugins new`` scaffolds."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_core.cli import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["honcho", "hindsight"])
def test_the_plugin_distributions_ship_license_and_typing(name: str) -> None:
    folder = ROOT / "plugins" / "memory" / name
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license-files"] == ["LICENSE"] and (folder / "LICENSE").is_file()
    assert "Typing :: Typed" in project["classifiers"]
    assert "Programming Language :: Python :: 3.11" in project["classifiers"]
    assert (folder / "src" / f"hermes_core_{name}" / "py.typed").is_file()


@pytest.mark.parametrize("kind", ["memory", "context-engine", "tool", "platform"])
def test_the_scaffold_ships_license_and_typing(tmp_path: Path, kind: str) -> None:
    result = CliRunner().invoke(cli, ["plugins", "new", "my-thing", "--kind", kind,
                                      "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "my-thing"
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    assert project["license"] == {"text": "MIT"}
    assert {"License :: OSI Approved :: MIT License", "Typing :: Typed"} <= set(
        project["classifiers"])
    assert pyproject["tool"]["setuptools"]["package-data"] == {"*": ["py.typed"]}
    assert "MIT License" in (root / "LICENSE").read_text(encoding="utf-8")
    assert [p.name for p in (root / "src").glob("*/py.typed")] == ["py.typed"]
