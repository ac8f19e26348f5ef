"""The old home of the eval library, kept for one minor release: it moved to the first-party
plugin ``hermes_core.plugins.eval`` (``datasets``, ``run``, ``stack``, ``report``). Each name here
warns (DeprecationWarning) and returns the plugin's."""

from __future__ import annotations

from .._lazy import moved

__all__ = ["Dataset", "DatasetError", "EvalOptions", "StackSpec", "build_report", "load_dataset",
           "parse_dataset", "run_eval"]

_NEW = "hermes_core.plugins.eval."
__getattr__ = moved(__name__, {
    **dict.fromkeys(["Dataset", "DatasetError", "load_dataset", "parse_dataset"], _NEW + "datasets"),
    **dict.fromkeys(["EvalOptions", "run_eval"], _NEW + "run"),
    "StackSpec": _NEW + "stack",
    "build_report": _NEW + "report",
})
