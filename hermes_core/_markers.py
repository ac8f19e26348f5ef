"""The pluggy markers for the ``hermes_core`` project.

Plugin authors import :data:`hookimpl` from :mod:`hermes_core`; they never import pluggy.
:func:`create_plugin_manager` is here too, so asking one plugin for its commands imports no host.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "hermes_core"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

__all__ = ["PROJECT_NAME", "create_plugin_manager", "hookimpl", "hookspec"]


def create_plugin_manager() -> pluggy.PluginManager:
    """A new PluginManager with every hermes-core hookspec added and nothing registered."""
    from . import hookspecs

    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm
