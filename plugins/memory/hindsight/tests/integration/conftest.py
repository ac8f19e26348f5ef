"""Fixtures that run the real Hindsight server (hindsight-api 1.1.0) on 127.0.0.1.

The server side lives in its own virtual environment, named by ``HINDSIGHT_SERVER_VENV`` (tox -e
hindsight builds it with ``python -m hermes_core_hindsight.localserver ensure-venv``). Without that
variable every test here is skipped with a note saying how to run them.

One embedding server (real all-MiniLM-L6-v2) is shared by two hindsight-api servers, each with its
own PostgreSQL: ``server`` with Hindsight's ``mock`` LLM and an API key (so the Bearer header is
checked by the real server), and ``degraded_server`` with LLM ``none`` (no facts extraction, no
observations, reflect refused). Everything is stopped by PID and its temporary directory removed at
the end of the session, also when tests fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hermes_core_hindsight.localserver import EmbeddingServer, HindsightStack

VENV = os.environ.get("HINDSIGHT_SERVER_VENV")
#: the key the ``server`` fixture's hindsight-api requires
API_KEY = "hermes-test-" + uuid.uuid4().hex[:12]
REPO = Path(__file__).resolve().parents[5]
_REPORT: dict[str, Any] = {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if VENV:
        return
    skip = pytest.mark.skip(reason="needs a real Hindsight server: run 'tox -e hindsight', or set "
                                   "HINDSIGHT_SERVER_VENV to a venv made by 'python -m "
                                   "hermes_core_hindsight.localserver ensure-venv DIR'")
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _REPORT:
        terminalreporter.write_sep("-", "hindsight servers (seconds to ready, RSS in MB)")
        for name, figures in _REPORT.items():
            terminalreporter.write_line(f"{name}: {figures}")


@pytest.fixture(scope="session")
def embeddings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddingServer]:
    assert VENV
    server = EmbeddingServer(Path(VENV), tmp_path_factory.mktemp("tei"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _stack(embeddings: EmbeddingServer, llm: str, api_key: str | None) -> Iterator[HindsightStack]:
    assert VENV
    stack = HindsightStack(Path(VENV), llm=llm, api_key=api_key, embeddings=embeddings)
    stack.start()
    try:
        _REPORT[f"llm={llm}"] = {"ready": stack.timings(), "rss_mb_at_start": stack.memory()}
        yield stack
        _REPORT[f"llm={llm}"]["rss_mb_at_end"] = stack.memory()
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def server(embeddings: EmbeddingServer) -> Iterator[HindsightStack]:
    """hindsight-api with the ``mock`` LLM, requiring :data:`API_KEY`."""
    yield from _stack(embeddings, "mock", API_KEY)


@pytest.fixture(scope="session")
def degraded_server(embeddings: EmbeddingServer) -> Iterator[HindsightStack]:
    """hindsight-api with no LLM at all."""
    yield from _stack(embeddings, "none", None)


@pytest.fixture
def bank() -> str:
    """A fresh bank per test: tests never see each other's memories."""
    return "t-" + uuid.uuid4().hex[:10]


@pytest.fixture
def api_key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """The key in HINDSIGHT_API_KEY, where the plugin's config reads it from."""
    monkeypatch.setenv("HINDSIGHT_API_KEY", API_KEY)
    return API_KEY


def config_text(base_url: str, bank: str, extra: str = "") -> str:
    return f"hindsight:\n  base_url: {base_url}\n  bank: {bank}\n{extra}"
