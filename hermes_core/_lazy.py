"""Lazy package attributes: a name is imported from its module on first use, then cached."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["load"]


def load(package: str, table: Mapping[str, str], name: str, namespace: dict[str, Any]) -> Any:
    """``name`` from ``package.<table[name]>``, kept in ``namespace`` (the package's globals) so
    the next lookup does not come back here; AttributeError for a name not in ``table``."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", package), name)
    namespace[name] = value
    return value
