"""The old home of ``hermes-core replay``'s click command, kept for one minor release: the command
moved to the first-party plugin ``hermes_core.plugins.replay`` (module ``commands``); the replay
library stays :mod:`hermes_core.replay`. ``replay`` here warns (DeprecationWarning) and returns
the plugin's."""

from __future__ import annotations

from .._lazy import moved

__all__ = ["replay"]  # noqa: F822 (resolved by __getattr__)

__getattr__ = moved(__name__, {"replay": "hermes_core.plugins.replay.commands"})
