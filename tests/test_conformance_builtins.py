"""The conformance suites of hermes_core.testing, run against the built-in plugins.

The same suites third-party authors subclass; if a built-in breaks the contract, this fails.
"""

from __future__ import annotations

import pytest

from hermes_core.config import CoreConfig
from hermes_core.models import context_window
from hermes_core.plugins.context_engine.compressor.engine import Compressor
from hermes_core.plugins.context_engine.lossless.engine import LosslessEngine
from hermes_core.plugins.memory.file_memory import FileMemory
from hermes_core.plugins.memory.session_archive import SessionArchiveProvider
from hermes_core.plugins.memory.skills import SkillsProvider
from hermes_core.testing import ContextEngineConformance, MemoryProviderConformance, make_instance

#: compression.threshold defaults to 0.50 of the default model's window
DEFAULT_THRESHOLD = int(context_window(CoreConfig()) * 0.5)


def _storage(url: str | None) -> str:
    return f"storage:\n  url: {url}\n" if url else ""


class TestFileMemoryConformance(MemoryProviderConformance):
    """On both backends: the memory files in the home, then rows in a PostgreSQL database."""

    tool_examples = {"memory": {"action": "add", "target": "memory", "content": "likes tea"}}

    @pytest.fixture
    def provider(self, hermes_home, storage_url):
        return make_instance(FileMemory, "memory-provider", hermes_home,
                             config=_storage(storage_url))


class TestSessionArchiveConformance(MemoryProviderConformance):
    """The session archive on both backends: state.db, then a PostgreSQL database."""

    tool_examples = {"session_search": {"query": "tea"}}

    @pytest.fixture
    def provider(self, hermes_home, storage_url):
        return make_instance(SessionArchiveProvider, "memory-provider", hermes_home,
                             config=_storage(storage_url))


class TestSkillsConformanceBothBackends(MemoryProviderConformance):
    """The skills library on both backends: skills/ in the home, then the skills table."""

    tool_examples = {
        "skills_list": {},
        "skill_manage": {"action": "create", "name": "tea", "description": "Make tea",
                         "body": "1. Boil water."},
    }

    @pytest.fixture
    def provider(self, hermes_home, storage_url):
        return make_instance(SkillsProvider, "memory-provider", hermes_home,
                             config=_storage(storage_url))


class TestCompressorConformance(ContextEngineConformance):
    threshold_tokens = DEFAULT_THRESHOLD

    @pytest.fixture
    def engine(self, hermes_home):
        # no API key in the isolated home: summaries take the deterministic fallback
        return make_instance(Compressor, "context-engine", hermes_home)


class TestLosslessConformance(ContextEngineConformance):
    """On both backends: context.db in the home, then lossless_* tables in PostgreSQL."""

    threshold_tokens = DEFAULT_THRESHOLD

    @pytest.fixture
    def engine(self, hermes_home, storage_url):
        return make_instance(LosslessEngine, "context-engine", hermes_home,
                             config=_storage(storage_url))
