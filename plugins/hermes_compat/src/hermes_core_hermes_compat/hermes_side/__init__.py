"""hermes-core's memory stack served to Hermes Agent through its one memory-provider slot.

Hermes Agent accepts one external memory provider. :class:`.provider.HermesCoreMemory` fills that
slot with hermes-core's whole configured stack: every provider of ``memory.providers`` behind one,
their prefetch under hermes-core's per-provider deadline, the session archive's hybrid search (and
any other tool of the stack) as tools, each Hermes turn stored in hermes-core's archive.

Hermes finds it two ways:

* newer Hermes: the ``hermes_agent.memory_providers`` entry point ``hermes_core`` (this module's
  :func:`register`), installed with this distribution;
* Hermes 0.19.0 (folder plugins only): ``python -m hermes_core_hermes_compat.hermes_side install``
  writes ``$HERMES_HOME/plugins/hermes_core/`` (see :mod:`.install`).

Then ``memory.provider: hermes_core`` in Hermes' config.yaml. This module imports nothing of
Hermes; :mod:`.provider` needs hermes-agent and is imported by :func:`register` only.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROVIDER_NAME", "register"]

#: the name Hermes selects it by (``memory.provider``) and its plugin folder's name
PROVIDER_NAME = "hermes_core"


def register(ctx: Any) -> None:
    """Hermes' plugin entry: hand it the provider (``ctx.register_memory_provider``)."""
    from .provider import HermesCoreMemory

    ctx.register_memory_provider(HermesCoreMemory())
