"""pytest fixtures for code that talks to Honcho: a fresh loopback server per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import HonchoTestServer

__all__ = ["honcho_config", "honcho_server"]


@pytest.fixture
def honcho_server(tmp_path: Path) -> Iterator[HonchoTestServer]:
    """A running :class:`HonchoTestServer` with its SQLite file in the test's tmp folder."""
    with HonchoTestServer(tmp_path / "honcho-server.db") as server:
        yield server


@pytest.fixture
def honcho_config(honcho_server: HonchoTestServer) -> str:
    """A config.yaml ``honcho:`` section pointing at ``honcho_server``, with short timeouts."""
    return (
        "honcho:\n"
        f"  base_url: {honcho_server.url}\n"
        "  workspace: test-ws\n"
        "  timeout: 2.0\n"
        "  tool_timeout: 2.0\n"
        "  retry_delay: 0.05\n"
    )
