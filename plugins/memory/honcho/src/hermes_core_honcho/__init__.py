"""hermes-core-honcho: a Honcho (v3 API) memory provider for hermes-core.

Install it next to hermes-core (``hermes-core plugins install hermes-core-honcho``), then list
``honcho`` in ``memory.providers``. The kernel finds it through the ``hermes_core.plugins`` entry
point (:mod:`.plugin`). The README has the configuration, the tools and the failure behaviour;
:mod:`.testing` ships a loopback Honcho-compatible server for tests.
"""

from __future__ import annotations

from ._version import __version__
from .client import HonchoClient, HonchoError, HonchoProtocolError, HonchoRejected, HonchoUnavailable
from .config import HonchoConfig
from .provider import HonchoProvider

__all__ = [
    "HonchoClient",
    "HonchoConfig",
    "HonchoError",
    "HonchoProtocolError",
    "HonchoProvider",
    "HonchoRejected",
    "HonchoUnavailable",
    "__version__",
]
