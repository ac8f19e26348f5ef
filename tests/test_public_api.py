"""The public surface is one documented list: docs/reference/api.md.

Every kernel module whose dotted path has no part starting with ``_`` (first-party plugins, under
``hermes_core.plugins``, are plugins and not listed) must be listed there, must define
``__all__``, and every name in its ``__all__`` must exist; every module listed must exist.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "hermes_core"
API = ROOT / "docs" / "reference" / "api.md"


def public_modules(kernel: Path = KERNEL) -> list[str]:
    out = []
    for path in sorted(kernel.rglob("*.py")):
        rel = path.relative_to(kernel)
        if rel.parts[0] == "plugins":
            continue
        parts = ["hermes_core", *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts[1:]):
            continue  # private (pluggy's discipline), __main__ included
        out.append(".".join(parts))
    return out


def listed_modules(text: str) -> list[str]:
    return re.findall(r"^\| `(hermes_core(?:\.[a-z_][a-z0-9_]*)*)` \|", text, flags=re.MULTILINE)


def _path_of(module: str, kernel: Path = KERNEL) -> Path:
    rel = Path(*module.split(".")[1:])
    package = kernel / rel / "__init__.py"
    return package if package.is_file() else (kernel / rel).with_suffix(".py")


def _declares_all(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
               for node in tree.body)


def test_every_public_module_is_listed_once_and_every_listed_one_exists() -> None:
    listed = listed_modules(API.read_text(encoding="utf-8"))
    assert len(listed) == len(set(listed)), "a module is listed twice in docs/reference/api.md"
    public = public_modules()
    missing = sorted(set(public) - set(listed))
    assert missing == [], f"public modules not listed in docs/reference/api.md: {missing}"
    stale = sorted(set(listed) - set(public))
    assert stale == [], f"docs/reference/api.md lists modules that are not public: {stale}"


@pytest.mark.parametrize("module", public_modules())
def test_every_public_module_declares_what_it_exports(module: str) -> None:
    assert _declares_all(_path_of(module)), f"{module} has no __all__"
    imported = importlib.import_module(module)
    for name in imported.__all__:
        assert hasattr(imported, name), f"{module}.__all__ names {name!r}, which it lacks"


def test_the_checks_catch_an_unlisted_module_and_a_missing_all(tmp_path: Path) -> None:
    kernel = tmp_path / "hermes_core"
    (kernel / "plugins" / "x").mkdir(parents=True)
    (kernel / "__init__.py").write_text("__all__ = []\n")
    (kernel / "shiny.py").write_text("VALUE = 1\n")
    (kernel / "_hidden.py").write_text("VALUE = 1\n")
    (kernel / "plugins" / "x" / "__init__.py").write_text("")
    assert public_modules(kernel) == ["hermes_core", "hermes_core.shiny"]
    assert not _declares_all(_path_of("hermes_core.shiny", kernel))
    assert listed_modules("| `hermes_core.shiny` | new |\n| `hermes_core` | top |\n") == [
        "hermes_core.shiny", "hermes_core"]
