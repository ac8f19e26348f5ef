"""Stand-in for ``agent.secret_scope``: in hermes-core, secrets come from the environment."""

from __future__ import annotations

import os

__all__ = ["get_secret"]


def get_secret(name: str, default: str | None = None) -> str | None:
    """The value of the environment variable ``name`` (``default`` when unset or empty)."""
    value = os.environ.get(name)
    return value if value else default
