"""Shared fixtures: the loopback Honcho server (``honcho_server``), and an environment free of the
developer's own Honcho settings (they would override the tests' config)."""

from __future__ import annotations

import pytest

pytest_plugins = ["hermes_core_honcho.testing.fixtures"]


@pytest.fixture(autouse=True)
def _no_honcho_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HONCHO_API_KEY", "HONCHO_BASE_URL", "HONCHO_URL", "HONCHO_WORKSPACE_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_provider(hermes_home, honcho_config):  # type: ignore[no-untyped-def]
    """Build HonchoProvider instances the way the kernel does; ``extra`` adds ``honcho:`` keys."""
    from hermes_core_honcho import HonchoProvider

    from hermes_core.testing import make_instance

    made = []

    def build(extra: str = "", *, config: str | None = None):  # type: ignore[no-untyped-def]
        text = config if config is not None else honcho_config + extra
        provider = make_instance(HonchoProvider, "memory-provider", hermes_home, config=text)
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.shutdown()
