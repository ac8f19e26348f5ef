"""The package's size at two git revisions, folder by folder: lines, code lines, modules, and the
kernel's public modules and names.

    python bench/package_size.py 64f06f7 HEAD

Counts the non-test ``.py`` files under ``hermes_core/`` and ``plugins/`` (a ``tests/`` folder
anywhere is left out). ``lines`` is every line of the file; ``code`` leaves out blank lines,
comments and docstrings. A folder is a kernel subpackage, ``hermes_core/*.py`` for the kernel's
top-level modules, or a plugin (``plugins/<kind>/<name>`` or ``plugins/<name>``; the separately
distributed ones under ``src/``). Public: modules of ``hermes_core`` (the bundled plugins left
out) with no ``_``-prefixed part, and the names their ``__all__`` lists.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import subprocess
from collections import Counter
from pathlib import PurePosixPath

_KINDS = {"memory", "context_engine", "llm", "platforms", "tools", "embedders"}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def folder(path: str) -> str:
    parts = path.split("/")
    if parts[0] == "plugins":
        if len(parts) > 3 and parts[1] in _KINDS:
            return "/".join(parts[:3])
        return "/".join(parts[:2]) if len(parts) > 2 else "plugins/*.py"
    return "/".join(parts[:2]) if len(parts) > 2 else "hermes_core/*.py"


def code_lines(source: str) -> int:
    """Lines that are not blank, a comment or part of a docstring."""
    lines = source.splitlines()
    docs: set[int] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            docs.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return sum(1 for i, line in enumerate(lines, 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def measure(rev: str) -> tuple[dict[str, Counter[str]], tuple[int, int]]:
    files = [f for f in _git("ls-tree", "-r", "--name-only", rev, "--", "hermes_core", "plugins").split()
             if f.endswith(".py") and "tests" not in PurePosixPath(f).parts]
    sizes: dict[str, Counter[str]] = {}
    public_modules = public_names = 0
    for path in files:
        source = _git("show", f"{rev}:{path}")
        row = sizes.setdefault(folder(path), Counter())
        row["lines"] += len(source.splitlines())
        row["code"] += code_lines(source)
        row["modules"] += 1
        parts = PurePosixPath(path).with_suffix("").parts
        if parts[0] != "hermes_core" or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        public_modules += 1
        for node in ast.parse(source).body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                with contextlib.suppress(ValueError):
                    public_names += len(ast.literal_eval(node.value))  # type: ignore[arg-type]
    return sizes, (public_modules, public_names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default="HEAD")
    args = parser.parse_args()
    (a, pa), (b, pb) = measure(args.before), measure(args.after)
    print(f"{'folder':42} {'lines':>13} {'code':>13} {'modules':>9}")
    total: dict[str, Counter[str]] = {"a": Counter(), "b": Counter()}
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name, Counter()), b.get(name, Counter())
        total["a"].update(x)
        total["b"].update(y)
        if x["lines"] or y["lines"] > 1:
            print(f"{name:42} {x['lines']:6} {y['lines']:6} {x['code']:6} {y['code']:6} "
                  f"{x['modules']:4} {y['modules']:4}")
    x, y = total["a"], total["b"]
    print(f"{'total':42} {x['lines']:6} {y['lines']:6} {x['code']:6} {y['code']:6} "
          f"{x['modules']:4} {y['modules']:4}")
    print(f"lines {y['lines'] - x['lines']:+d}, code {y['code'] - x['code']:+d}; public modules "
          f"{pa[0]} -> {pb[0]}, public names {pa[1]} -> {pb[1]}")


if __name__ == "__main__":
    main()
