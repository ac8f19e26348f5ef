"""A module of the session archive as it was at an earlier git revision, for side-by-side benches."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

PACKAGE = "hermes_core.plugins.memory.session_archive"


def module_at(revision: str, name: str, scratch: Path,
              renames: dict[str, str] | None = None) -> ModuleType:
    """``plugins/memory/session_archive/<name>.py`` at ``revision``, loaded beside the package as
    ``<name>_before``; ``renames`` replaces text of its source first (to point a relative import
    at another ``_before`` module)."""
    source = subprocess.run(
        ["git", "show", f"{revision}:plugins/memory/session_archive/{name}.py"],
        check=True, capture_output=True, text=True).stdout
    for old, new in (renames or {}).items():
        source = source.replace(old, new)
    path = scratch / f"{name}_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
