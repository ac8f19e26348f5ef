"""Stand-in for ``hermes_constants``: where a Hermes plugin keeps its files.

The bridge sets a per-call home (a context variable) around every call into a Hermes plugin, so
``get_hermes_home()`` answers the folder the bridge gave that plugin (inside the hermes-core home);
outside such a call it answers ``$HERMES_HOME``, then ``~/.hermes``.
"""

from __future__ import annotations

import contextvars
import os
from pathlib import Path

__all__ = ["get_hermes_home", "home_override"]

#: set by the bridge around each call into a plugin
home_override: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "hermes_core_hermes_home", default=None)


def get_hermes_home() -> Path:
    override = home_override.get()
    if override:
        return Path(override)
    env = os.environ.get("HERMES_HOME", "").strip()
    return Path(env) if env else Path.home() / ".hermes"


def display_hermes_home() -> str:
    return str(get_hermes_home())
