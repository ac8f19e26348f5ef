"""The pluggy markers for the ``hermes_core`` project.

Plugin authors import :data:`hookimpl` from :mod:`hermes_core`; they never import pluggy.
:func:`hermes_core.hookspecs.create_plugin_manager` builds a plugin manager with the specs added.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "hermes_core"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

