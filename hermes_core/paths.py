"""Where hermes-core keeps its files."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["config_path", "home_dir", "plugins_dir"]

HOME_ENV = "HERMES_CORE_HOME"


def home_dir() -> Path:
    """``$HERMES_CORE_HOME``, or ``~/.hermes-core``; not created here."""
    value = os.environ.get(HOME_ENV)
    return Path(value).expanduser() if value else Path.home() / ".hermes-core"


def config_path(home: Path | None = None) -> Path:
    return (home or home_dir()) / "config.yaml"


def plugins_dir(home: Path | None = None) -> Path:
    return (home or home_dir()) / "plugins"
