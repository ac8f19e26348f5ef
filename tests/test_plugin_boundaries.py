"""Plugins stand alone and the kernel knows none of them by name.

* No plugin imports another plugin's modules (first-party plugins and the two third-party
  distributions in plugins/): what two plugins share lives in a public kernel module.
* The kernel (hermes_core/, the plugins symlink excluded) imports no plugin module, and no string
  in its code names a first-party plugin or one of their tools, except the places listed in
  ``ALLOWED`` below (the list of built-ins and the default selection).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hermes_core.loader import BUILTIN_PLUGINS

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
KERNEL = ROOT / "hermes_core"

#: the top-level packages of the third-party distributions kept in plugins/
THIRD_PARTY = {
    "hermes_core_honcho": PLUGINS / "memory" / "honcho" / "src" / "hermes_core_honcho",
    "hermes_core_hindsight": PLUGINS / "memory" / "hindsight" / "src" / "hermes_core_hindsight",
}
#: names the kernel's code may not spell: the built-ins and the tools they offer
TOOL_NAMES = ("skill_manage", "session_search", "context_search", "context_expand")
#: (file relative to hermes_core/, string) pairs that may name a built-in, and why
ALLOWED = {
    ("loader.py", "*"),  # BUILTIN_PLUGINS: the one list of built-ins
    ("config.py", "file_memory"),  # the default memory.providers selection
    ("config.py", "session_archive"),
    ("config.py", "skills"),
    ("config.py", "compressor"),  # the default context.engine
    ("cli/serve_cmd.py", "webhook"),  # serve's default --platform
    ("cli/doctor_cmd.py", "session_archive"),  # state.db check: moves with the doctor hook
    ("scaffold.py", "file_memory"),  # the README of a scaffolded plugin shows a selection
}


def _first_party_roots() -> dict[str, Path]:
    """Plugin name -> its package folder, from the list of built-ins."""
    prefix = "hermes_core.plugins."
    return {name: PLUGINS.joinpath(*module[len(prefix):].split("."))
            for name, module in BUILTIN_PLUGINS.items()}


def _plugin_roots() -> dict[str, Path]:
    return {**_first_party_roots(), **THIRD_PARTY}


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every imported module of ``path`` as an absolute dotted name (relative ones resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _package_of(path)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.append((node.lineno, target))
            out += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return out


def _package_of(path: Path) -> str:
    """The dotted package a file's relative imports resolve against."""
    for top, root in THIRD_PARTY.items():
        if path.is_relative_to(root):
            rel = path.parent.relative_to(root)
            return ".".join([top, *rel.parts])
    if path.is_relative_to(PLUGINS):
        return ".".join(["hermes_core", "plugins", *path.parent.relative_to(PLUGINS).parts])
    return ".".join(["hermes_core", *path.parent.relative_to(KERNEL).parts])


def _module_of(root: Path) -> str:
    for top, folder in THIRD_PARTY.items():
        if root == folder:
            return top
    return ".".join(["hermes_core", "plugins", *root.relative_to(PLUGINS).parts])


def _foreign_plugin(module: str, own: str) -> str | None:
    """The other plugin ``module`` belongs to, if any (``own`` is the importing plugin)."""
    for name, root in _plugin_roots().items():
        prefix = _module_of(root)
        if name != own and (module == prefix or module.startswith(prefix + ".")):
            return name
    if module.startswith("plugins."):  # the source tree's package, a way round the symlink
        return module
    return None


def plugin_to_plugin_imports() -> list[str]:
    problems = []
    for name, root in _plugin_roots().items():
        for path in sorted(root.rglob("*.py")):
            for line, module in _imports(path):
                other = _foreign_plugin(module, name)
                if other is not None:
                    problems.append(f"{path.relative_to(ROOT)}:{line}: plugin {name!r} imports "
                                    f"{module} (plugin {other!r})")
    return problems


def _kernel_files() -> list[Path]:
    return sorted(p for p in KERNEL.rglob("*.py") if not p.is_relative_to(KERNEL / "plugins"))


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def kernel_plugin_knowledge() -> list[str]:
    names = [n for n in BUILTIN_PLUGINS if n != "cli"]  # "cli" is also the CLI platform's word
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, [*names, *TOOL_NAMES])) + r")\b")
    problems = []
    for path in _kernel_files():
        rel = path.relative_to(KERNEL).as_posix()
        if (rel, "*") in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in _imports(path):
            if module == "hermes_core.plugins" or module.startswith("hermes_core.plugins."):
                parts = module.split(".")
                if (rel, parts[4] if len(parts) > 4 else "") not in ALLOWED:
                    problems.append(f"hermes_core/{rel}:{line}: imports plugin module {module}")
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in skip):
                for match in pattern.finditer(node.value):
                    if (rel, match.group(1)) not in ALLOWED:
                        problems.append(f"hermes_core/{rel}:{node.lineno}: names "
                                        f"{match.group(1)!r} in {node.value[:60]!r}")
    return problems


def test_no_plugin_imports_another_plugin() -> None:
    assert plugin_to_plugin_imports() == []


def test_the_kernel_names_no_plugin_outside_the_list_of_builtins() -> None:
    assert kernel_plugin_knowledge() == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check fails on a planted violation (so an empty answer means something)."""
    planted = PLUGINS / "tools" / "todo" / "_boundary_probe.py"
    planted.write_text("from hermes_core.plugins.memory.file_memory import store\n"
                       "from ...memory.skills import library\n", encoding="utf-8")
    try:
        problems = plugin_to_plugin_imports()
    finally:
        planted.unlink()
    assert any("file_memory" in p and "_boundary_probe" in p for p in problems)
    assert any("skills" in p and "_boundary_probe" in p for p in problems)

    kernel_probe = KERNEL / "_boundary_probe.py"
    kernel_probe.write_text("from .plugins.memory import file_memory\n"
                            "TOOL = 'skill_manage'\n", encoding="utf-8")
    try:
        problems = kernel_plugin_knowledge()
    finally:
        kernel_probe.unlink()
    assert any("imports plugin module" in p for p in problems)
    assert any("'skill_manage'" in p for p in problems)
