"""hermes-core-hermes-compat: the bridge between Hermes Agent plugins and hermes-core."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
