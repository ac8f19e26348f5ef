"""The old home of ``hermes-core plugins new`` as a library call, kept for one minor release: it
moved to the first-party plugin ``hermes_core.plugins.scaffold`` (module ``build``). Each name here
warns (DeprecationWarning) and returns the plugin's."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["KINDS", "ScaffoldError", "scaffold"]  # noqa: F822 (resolved by __getattr__)


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = "hermes_core.plugins.scaffold.build"
    warnings.warn(f"hermes_core.scaffold.{name} moved to {new}.{name}; import it from there",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(new), name)
