"""Testing aids shipped with hermes-core-honcho: a loopback Honcho-compatible server.

* :class:`HonchoTestServer` (:mod:`.server`): the v3 endpoints the provider uses, on 127.0.0.1,
  with data in SQLite and switches for failures (:class:`Fault`);
* pytest fixtures (:mod:`.fixtures`): ``honcho_server`` and ``honcho_config``. Enable them with
  ``pytest_plugins = ["hermes_core_honcho.testing.fixtures"]`` in a ``conftest.py``.
"""

from __future__ import annotations

from .server import Fault, HonchoTestServer, RecordedRequest

__all__ = ["Fault", "HonchoTestServer", "RecordedRequest"]
