"""Shared fixtures: the loopback Honcho server (``honcho_server``), and an environment free of the
developer's own Honcho settings (they would override the tests' config)."""

from __future__ import annotations

import pytest

pytest_plugins = ["hermes_core_honcho.testing.fixtures"]


@pytest.fixture(autouse=True)
def _no_honcho_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HONCHO_API_KEY", "HONCHO_BASE_URL", "HONCHO_URL", "HONCHO_WORKSPACE_ID"):
        monkeypatch.delenv(name, raising=False)
