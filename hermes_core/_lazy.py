"""Lazy package attributes: a name is imported from its module on first use, then cached; and
the old homes of moved names, which warn and hand over the new one."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["load", "moved"]


def load(package: str, table: Mapping[str, str], name: str, namespace: dict[str, Any]) -> Any:
    """``name`` from ``package.<table[name]>``, kept in ``namespace`` (the package's globals) so
    the next lookup does not come back here; AttributeError for a name not in ``table``."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", package), name)
    namespace[name] = value
    return value


def moved(old: str, new: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of module ``old`` whose names moved: ``new`` maps each to its new
    module; each use warns (DeprecationWarning) naming where to import it from."""

    def __getattr__(name: str) -> Any:
        module = new.get(name)
        if module is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} moved to {module}.{name}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), name)

    return __getattr__
