"""The old home of ``hermes-core replay``'s click command, kept for one minor release: the command
moved to the first-party plugin ``hermes_core.plugins.replay`` (module ``commands``); the replay
library stays :mod:`hermes_core.replay`. ``replay`` here warns (DeprecationWarning) and returns
the plugin's."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["replay"]  # noqa: F822 (resolved by __getattr__)


def __getattr__(name: str) -> Any:
    if name != "replay":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new = "hermes_core.plugins.replay.commands"
    warnings.warn(f"hermes_core.cli.replay_cmd.{name} moved to {new}.{name}; import it from there",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(new), name)
