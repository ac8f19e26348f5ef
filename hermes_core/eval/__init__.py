"""The old home of the eval library, kept for one minor release: it moved to the first-party
plugin ``hermes_core.plugins.eval`` (``datasets``, ``run``, ``stack``, ``report``). Each name here
warns (DeprecationWarning) and returns the plugin's."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["Dataset", "DatasetError", "EvalOptions", "StackSpec", "build_report", "load_dataset",
           "parse_dataset", "run_eval"]

_WHERE = {"Dataset": "datasets", "DatasetError": "datasets", "load_dataset": "datasets",
          "parse_dataset": "datasets", "EvalOptions": "run", "run_eval": "run",
          "StackSpec": "stack", "build_report": "report"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = f"hermes_core.plugins.eval.{module}"
    warnings.warn(f"hermes_core.eval.{name} moved to {new}.{name}; import it from there",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(new), name)
