"""Where a Hermes plugin's calls run: its own Hermes home inside the hermes-core home.

Each Hermes provider gets ``<hermes-core home>/hermes-compat/<plugin>/`` (and, under
``memory.scope: user``, ``.../users/<key>/`` per user) as its ``hermes_home``. Around every call
the bridge sets that folder as the answer of the stand-in ``hermes_constants.get_hermes_home()``
(a context variable, so two providers on two threads each see their own). ``HERMES_HOME`` is a
process-wide variable, so it is pointed at the common parent ``<home>/hermes-compat/`` when the
first plugin initialises: a plugin (or its own background thread) reading it directly stays
inside the hermes-core home too.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from . import shims

__all__ = ["COMPAT_DIR", "compat_root", "hermes_home_for", "in_home", "point_env"]

COMPAT_DIR = "hermes-compat"


def compat_root(home: Path) -> Path:
    return home / COMPAT_DIR


def hermes_home_for(home: Path, plugin: str, user_key: str | None) -> Path:
    base = compat_root(home) / re.sub(r"[^A-Za-z0-9_.-]+", "_", plugin)
    if user_key is None:
        return base
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", user_key)[:40]
    digest = hashlib.sha256(user_key.encode("utf-8")).hexdigest()[:10]
    return base / "users" / f"{safe}-{digest}"


def point_env(home: Path) -> None:
    """Point ``HERMES_HOME`` at the bridge's folder of ``home`` (process-wide)."""
    os.environ["HERMES_HOME"] = str(compat_root(home))


@contextlib.contextmanager
def in_home(path: Path) -> Iterator[None]:
    """Run a call with ``path`` as the stand-in ``get_hermes_home()`` answer."""
    module = sys.modules.get("hermes_constants")
    if module is None and shims.installed():
        module = importlib.import_module("hermes_constants")
    var = getattr(module, "home_override", None)
    if var is None:  # real hermes-agent: it reads HERMES_HOME (pointed at the bridge's folder)
        yield
        return
    token = var.set(str(path))
    try:
        yield
    finally:
        var.reset(token)
