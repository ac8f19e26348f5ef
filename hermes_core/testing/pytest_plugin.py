"""The pytest plugin (``pytest11`` entry point ``hermes_core``): fixtures for plugin tests.

Installed with hermes-core, so any test suite gets them; every fixture name starts with
``hermes_`` to stay out of other plugins' way. Without the entry point, enable it with
``pytest_plugins = ["hermes_core.testing.pytest_plugin"]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["hermes_home", "hermes_host", "hermes_messages_api", "hermes_replay"]


@pytest.fixture
def hermes_home(tmp_path: Path) -> Iterator[Path]:
    """An isolated ``$HERMES_CORE_HOME`` (no config, no plugin or API-key environment)."""
    from .harness import isolated_home

    with isolated_home(path=tmp_path / "hermes-home") as home:
        yield home


@pytest.fixture
def hermes_host(hermes_home: Path):  # type: ignore[no-untyped-def]
    """A PluginHost on ``hermes_home``: built-in plugins loaded, entry-point autoload off."""
    from .harness import make_host

    host = make_host(hermes_home)
    yield host
    host.shutdown()


@pytest.fixture
def hermes_messages_api():  # type: ignore[no-untyped-def]
    """A running loopback Messages API server; script it with ``.enqueue(...)``."""
    from .messages_api import MessagesAPIServer

    with MessagesAPIServer() as server:
        yield server


@pytest.fixture
def hermes_replay(hermes_home: Path):  # type: ignore[no-untyped-def]
    """:func:`~hermes_core.testing.replaying.run_replay` bound to ``hermes_home``:
    ``hermes_replay(transcript, plugins=[...], providers=[...])`` returns the replay report."""
    import functools

    from .replaying import run_replay

    return functools.partial(run_replay, hermes_home)
