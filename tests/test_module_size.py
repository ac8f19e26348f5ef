"""No source module of the kernel or of a plugin grows past 600 lines (one concept per module).

A module that needs more is two concepts: split it where its parts stop sharing state (the
archive's ranking policy and its SQL filters, say), not at an arbitrary line.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600


def _sources() -> list[Path]:
    out = []
    for top in (ROOT / "hermes_core", ROOT / "plugins"):
        for path in top.rglob("*.py"):
            rel = path.relative_to(ROOT).parts
            # the plugins symlink inside the kernel is the same files; tests are not modules
            if "tests" in rel or rel[:2] == ("hermes_core", "plugins") or ".tox" in rel:
                continue
            out.append(path)
    return out


def test_the_module_walk_finds_the_kernel_and_the_plugins() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _sources()}
    assert "hermes_core/host.py" in names
    assert "plugins/memory/session_archive/hybrid.py" in names


def test_no_module_is_longer_than_600_lines() -> None:
    long = {p.relative_to(ROOT).as_posix(): n for p in _sources()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > LIMIT}
    assert not long, (f"modules over {LIMIT} lines (split each where its parts stop sharing "
                      f"state): {long}")
