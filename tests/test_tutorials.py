"""Every snippet of the tutorials (and of docs/testing.md, the test-kit guide) runs: the Python
blocks of each page, in order, as one test module (so the conformance suites they define really
run), and the TOML blocks parse."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[1] / "docs"
TUTORIALS = [*sorted((DOCS / "tutorials").glob("*.md")), DOCS / "testing.md"]


def blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_snippets_run(page, pytester):
    source = "\n\n".join(blocks(page, "python"))
    assert source, f"{page.name} has no python snippets"
    pytester.makepyfile(**{f"test_{page.stem.replace('-', '_')}": source})
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) >= 10  # the conformance suite ran


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_toml_parses(page):
    for block in blocks(page, "toml"):
        tomllib.loads(block)
