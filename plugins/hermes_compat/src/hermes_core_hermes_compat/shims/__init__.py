"""Stand-ins for the few Hermes Agent modules that Hermes plugins import.

Hermes plugins import ``agent.memory_provider``, ``agent.context_engine``, ``agent.secret_scope``,
``tools.registry``, ``hermes_constants`` and ``hermes_cli.config``. Installing packages with those
generic top-level names into site-packages would clash with other projects (hermes-agent itself
ships ``agent``, ``tools``, ``plugins``, ``utils``), so the bridge never does. Instead
:func:`install` appends one import finder to the *end* of ``sys.meta_path``:

* it answers only the exact module names of :data:`SHIMMED` (nothing else, not even other
  submodules of those packages), so a Hermes module it does not provide fails with an ordinary
  ``ModuleNotFoundError`` that the status command reports as "needs hermes-agent";
* being last, it never shadows a real module: when hermes-agent (or any other package with one of
  those names) is installed, the normal finders find the real one first;
* it is installed only when the bridge is about to import a Hermes plugin (one is selected, or
  ``hermes-core hermes plugins`` / ``doctor`` looks at them), never by ``import hermes_core`` or by
  loading the bridge, and not at all when hermes-agent is installed.

It stays installed afterwards because Hermes plugins import these names lazily, inside their
methods (``from hermes_constants import get_hermes_home`` in ``initialize``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["SHIMMED", "hermes_agent_installed", "install", "installed"]

#: module name -> file under this folder
SHIMMED: dict[str, str] = {
    "agent": "agent/__init__.py",
    "agent.memory_provider": "agent/memory_provider.py",
    "agent.context_engine": "agent/context_engine.py",
    "agent.secret_scope": "agent/secret_scope.py",
    "agent.plugin_llm": "agent/plugin_llm.py",
    "tools": "tools/__init__.py",
    "tools.registry": "tools/registry.py",
    "hermes_constants": "hermes_constants.py",
    "hermes_cli": "hermes_cli/__init__.py",
    "hermes_cli.config": "hermes_cli/config.py",
}

_ROOT = Path(__file__).resolve().parent


class _ShimFinder(importlib.abc.MetaPathFinder):
    """Finds the stand-in modules, and only them."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        relative = SHIMMED.get(fullname)
        if relative is None:
            return None
        file = _ROOT / relative
        package = file.name == "__init__.py"
        # a package's __path__ is empty: its other submodules are not ours to find
        return importlib.util.spec_from_file_location(
            fullname, file, submodule_search_locations=[] if package else None)


_FINDER = _ShimFinder()


def hermes_agent_installed() -> bool:
    """Whether the real hermes-agent distribution is installed (then its modules are used)."""
    from importlib import metadata

    try:
        metadata.distribution("hermes-agent")
    except metadata.PackageNotFoundError:
        return False
    return True


def installed() -> bool:
    return _FINDER in sys.meta_path


def install() -> bool:
    """Serve the stand-ins from now on, unless hermes-agent is installed; returns whether the
    stand-ins are in use."""
    if installed():
        return True
    if hermes_agent_installed():
        return False
    sys.meta_path.append(_FINDER)
    return True
