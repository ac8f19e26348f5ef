"""Meta-tests: every hook is documented with its exact signature and tested; doc examples run."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from hermes_core import hookspecs

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference"
PAGES = sorted(REFERENCE.glob("*.md"))
GROUPS = ("REGISTRY_HOOKS", "MEMORY_HOOKS", "CONTEXT_ENGINE_HOOKS", "TOOL_HOOKS", "PLATFORM_HOOKS",
          "MODULE_HOOKS")
ALL_HOOKS = [name for group in GROUPS for name in getattr(hookspecs, group)]


def signature(name: str) -> str:
    sig = inspect.signature(getattr(hookspecs, name))
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"{name}({params}) -> {sig.return_annotation}"


def test_every_hookspec_is_in_a_group():
    specs = {n for n, f in vars(hookspecs).items() if hasattr(f, "hermes_core_spec")}
    assert specs == set(ALL_HOOKS)
    assert len(ALL_HOOKS) == len(set(ALL_HOOKS))
    assert set(hookspecs.__all__) == specs


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_hook_has_docstring(name):
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert len(doc) > 60, f"hookspec {name} needs a docstring: when, with what, what it returns"


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_hook_is_documented_with_its_signature(name):
    heading = f"### `{signature(name)}`"
    found = [p.name for p in PAGES if heading in p.read_text(encoding="utf-8").splitlines()]
    assert found, f"no section '{heading}' in docs/reference/*.md"


@pytest.mark.parametrize("name", ALL_HOOKS)
def test_hook_is_tested(name):
    pattern = re.compile(rf"^def test_hook_{name}\(", re.MULTILINE)
    assert any(pattern.search(p.read_text(encoding="utf-8"))
               for p in Path(__file__).parent.rglob("test_*.py")), f"no test_hook_{name}"


def _python_blocks():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for i, match in enumerate(re.finditer(r"```python\n(.*?)```", text, re.DOTALL)):
            yield pytest.param(match.group(1), id=f"{page.stem}-{i}")


@pytest.mark.parametrize("source", list(_python_blocks()))
def test_reference_examples_run(source):
    exec(compile(source, "<docs example>", "exec"), {"__name__": "docs_example"})
