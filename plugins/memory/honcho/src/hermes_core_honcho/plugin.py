"""The entry point of hermes-core-honcho (group ``hermes_core.plugins``, name ``honcho``).

hermes-core imports this module only when the plugin is enabled, and registers the provider class;
the class is instantiated when ``memory.providers`` lists ``honcho``.
"""

from __future__ import annotations

from collections.abc import Callable

from hermes_core import hookimpl

from .provider import HonchoProvider

__all__ = ["register_memory_providers"]


@hookimpl
def register_memory_providers(register: Callable[[type], None]) -> None:
    register(HonchoProvider)
