"""The old home of ``hermes-core plugins new`` as a library call, kept for one minor release: it
moved to the first-party plugin ``hermes_core.plugins.scaffold`` (module ``build``). Each name here
warns (DeprecationWarning) and returns the plugin's."""

from __future__ import annotations

from ._lazy import moved

__all__ = ["KINDS", "ScaffoldError", "scaffold"]  # noqa: F822 (resolved by __getattr__)

__getattr__ = moved(__name__, dict.fromkeys(__all__, "hermes_core.plugins.scaffold.build"))
