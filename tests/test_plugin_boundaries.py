"""Plugins stand alone and the kernel knows none of them by name.

* No plugin imports another plugin's modules (first-party plugins and the two third-party
  distributions in plugins/), nor the kernel's deprecated aliases of them (the old homes that
  hand over a plugin's names): what two plugins share lives in a public kernel module, and what
  one plugin offers another at run time is reached through the plugin manager.
* The kernel (hermes_core/, the plugins symlink excluded) imports no plugin module, and no string
  in its code (docstrings are prose and are skipped) names a first-party plugin or one of their
  tools, except the places listed in ``ALLOWED`` below (the list of built-ins and the default
  selection).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hermes_core.loader import BUILTIN_PLUGINS

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"
KERNEL = ROOT / "hermes_core"

#: the top-level packages of the third-party distributions kept in plugins/, and their folders
THIRD_PARTY = {
    "hermes_core_honcho": Path("memory", "honcho", "src", "hermes_core_honcho"),
    "hermes_core_hindsight": Path("memory", "hindsight", "src", "hermes_core_hindsight"),
}
#: names the kernel's code may not spell besides the built-ins': the tools they offer
TOOL_NAMES = ("skill_manage", "session_search", "context_search", "context_expand")
#: (file relative to hermes_core/, name) pairs that may name a built-in, and why
ALLOWED = {
    ("loader.py", "*"),  # BUILTIN_PLUGINS: the one list of built-ins
    ("_config_sections.py", "file_memory"),  # the default memory.providers selection
    ("_config_sections.py", "session_archive"),
    ("_config_sections.py", "skills"),
    ("_config_sections.py", "compressor"),  # the default context.engine
    ("cli/serve_cmd.py", "webhook"),  # serve's default --platform
    ("scaffold.py", "*"),  # the scaffold's old home: a deprecation alias for one release
    ("curation.py", "*"),  # the memory review's old home: a deprecation alias for one release
    ("embeddings.py", "minilm"),  # embeddings.embedder: auto prefers the first-party local one
    ("bearer.py", "mcp"),  # the home's token keeps its public names: mcp-token, 'mcp token'
    ("_config_sections.py", "anthropic"),  # the default llm.client
    ("llm.py", "anthropic"),  # hermes_core.llm.AnthropicLLM: the old name, a deprecation alias
    ("eval/__init__.py", "*"),  # the eval library's old home: a deprecation alias for one release
    ("cli/replay_cmd.py", "*"),  # the replay command's old home: a deprecation alias for one release
    ("replay.py", "replay"),  # the replay library (the kit's) is named so too: its own names
    ("cli/chat_cmd.py", "replay"),  # without a key, chat suggests 'hermes-core replay'
    ("cli/doctor_cmd.py", "replay"),  # doctor says 'hermes-core replay' works without a key
    ("threats.py", "anthropic"),  # a vendor's name in a pattern of risky shell commands
    ("threats.py", "openai"),  # the same pattern names OPENAI_API_KEY-style variables
    ("testing/context_model.py", "anthropic"),  # the Messages API's own header, anthropic-beta
    ("testing/messages_api.py", "anthropic"),  # the same header, read by the loopback server
}
_PREFIX = "hermes_core.plugins."
#: the kernel modules that are deprecated aliases of a plugin's (each hands over its names)
ALIASES = sorted("hermes_core." + rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
                 for rel, name in ALLOWED if name == "*" and rel != "loader.py")


def plugin_roots(plugins: Path = PLUGINS) -> dict[str, Path]:
    """Plugin name -> its package folder: the built-ins, then the third-party distributions."""
    first = {name: plugins.joinpath(*module[len(_PREFIX):].split("."))
             for name, module in BUILTIN_PLUGINS.items()}
    return {**first, **{top: plugins / folder for top, folder in THIRD_PARTY.items()}}


def _package_of(path: Path, plugins: Path, kernel: Path) -> str:
    """The dotted package a file's relative imports resolve against."""
    for top, folder in THIRD_PARTY.items():
        if path.is_relative_to(plugins / folder):
            return ".".join([top, *path.parent.relative_to(plugins / folder).parts])
    if path.is_relative_to(plugins):
        return ".".join(["hermes_core", "plugins", *path.parent.relative_to(plugins).parts])
    return ".".join(["hermes_core", *path.parent.relative_to(kernel).parts])


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """Every imported module (and imported name) of ``path`` as an absolute dotted name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
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


def plugin_to_plugin_imports(plugins: Path = PLUGINS) -> list[str]:
    roots = plugin_roots(plugins)
    modules = {name: name if name in THIRD_PARTY
               else ".".join(["hermes_core", "plugins", *root.relative_to(plugins).parts])
               for name, root in roots.items()}
    problems = []
    for name, root in roots.items():
        for path in sorted(root.rglob("*.py")):
            seen: set[tuple[int, str]] = set()
            for line, module in _imports(path, _package_of(path, plugins, KERNEL)):
                others = [other for other, prefix in modules.items() if other != name
                          and (module == prefix or module.startswith(prefix + "."))]
                if module.startswith("plugins."):  # the source tree's package: round the symlink
                    others.append(module)
                others += [alias for alias in ALIASES
                           if module == alias or module.startswith(alias + ".")]
                for other in others:
                    if (line, other) not in seen:
                        seen.add((line, other))
                        problems.append(f"{path.relative_to(plugins.parent)}:{line}: plugin "
                                        f"{name!r} imports {module} (plugin {other!r})")
    return problems


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def kernel_plugin_knowledge(kernel: Path = KERNEL) -> list[str]:
    names = [n for n in BUILTIN_PLUGINS if n != "cli"]  # "cli" is also the terminal's word
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, [*names, *TOOL_NAMES])) + r")\b")
    problems = []
    files = sorted(p for p in kernel.rglob("*.py") if not p.is_relative_to(kernel / "plugins"))
    for path in files:
        rel = path.relative_to(kernel).as_posix()
        if (rel, "*") in ALLOWED:
            continue
        seen: set[tuple[int, str]] = set()
        for line, module in _imports(path, _package_of(path, PLUGINS, kernel)):
            if module == "hermes_core.plugins" or module.startswith(_PREFIX):
                parts = module.split(".")
                if (rel, parts[3] if len(parts) > 3 else "") in ALLOWED or (line, rel) in seen:
                    continue
                seen.add((line, rel))
                problems.append(f"hermes_core/{rel}:{line}: imports plugin module {module}")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                for match in pattern.finditer(node.value):
                    if (rel, match.group(1)) not in ALLOWED:
                        problems.append(f"hermes_core/{rel}:{node.lineno}: names "
                                        f"{match.group(1)!r} in {node.value[:60]!r}")
    return problems


def test_no_plugin_imports_another_plugin() -> None:
    assert plugin_to_plugin_imports() == []


def test_the_kernel_names_no_plugin_outside_the_list_of_builtins() -> None:
    assert kernel_plugin_knowledge() == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """Each check fails on planted violations (so an empty answer means something)."""
    plugins = tmp_path / "plugins"
    for root in plugin_roots(plugins).values():
        root.mkdir(parents=True, exist_ok=True)
    (plugins / "tools" / "todo" / "probe.py").write_text(
        "from hermes_core.plugins.memory.file_memory import store\n"
        "from ...memory.skills import library\n"
        "from hermes_core_honcho import client\n"
        "from hermes_core.plugins.tools.todo import own\n"
        "from hermes_core.curation import review_session\n"
        "from . import sibling\n", encoding="utf-8")
    problems = plugin_to_plugin_imports(plugins)
    assert len(problems) == 4, problems  # its own package is fine
    assert any("(plugin 'file_memory')" in p for p in problems)
    assert any("(plugin 'skills')" in p for p in problems)
    assert any("(plugin 'hermes_core_honcho')" in p for p in problems)
    assert any("(plugin 'hermes_core.curation')" in p for p in problems)

    kernel = tmp_path / "hermes_core"
    kernel.mkdir()
    (kernel / "probe.py").write_text(
        "from .plugins.memory import file_memory\n"
        "TOOL = 'skill_manage'\n"
        "def f():\n"
        "    \"\"\"skill_manage in a docstring is prose.\"\"\"\n", encoding="utf-8")
    problems = kernel_plugin_knowledge(kernel)
    assert len(problems) == 2, problems
    assert any("imports plugin module hermes_core.plugins.memory" in p for p in problems)
    assert any("'skill_manage'" in p and "probe.py:2:" in p for p in problems)
