"""hermes-core's memory-provider conformance suite, against the real hindsight-api server."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from hermes_core_hindsight import HindsightMemory

from hermes_core.testing import MemoryProviderConformance, make_instance

from .conftest import config_text


class _RealServer(MemoryProviderConformance):
    recalls_across_sessions = True
    # asked in other words: the statement says "hang", the query says "timeout"
    recall_statement = "I fixed the database hang by raising the connection pool size to 40."
    recall_query = "how did I solve the timeout"
    recall_expect = "database hang"

    def settle(self, provider: HindsightMemory) -> None:
        assert provider.settle(300), (
            "the spool or the server's queue did not settle in 300 s (it ends as soon as the "
            f"server reports the operations finished); failed: {provider.failed_operations}")


class TestConformanceWithLLM(_RealServer):
    tool_examples: ClassVar[dict[str, dict[str, Any]]] = {
        "hindsight_retain": {"content": "The staging VPN needs the 2026 certificate."},
        "hindsight_recall": {"query": "VPN certificate"},
        "hindsight_reflect": {"query": "What does the VPN need?"},
    }

    @pytest.fixture
    def provider(self, server, hermes_home, bank, api_key_env):
        return make_instance(HindsightMemory, "memory-provider", hermes_home,
                             config=config_text(server.base_url, bank))


class TestConformanceWithoutLLM(_RealServer):
    tool_examples: ClassVar[dict[str, dict[str, Any]]] = {
        "hindsight_retain": {"content": "The staging VPN needs the 2026 certificate."},
        "hindsight_recall": {"query": "VPN certificate"},
    }

    @pytest.fixture
    def provider(self, degraded_server, hermes_home, bank):
        return make_instance(HindsightMemory, "memory-provider", hermes_home,
                             config=config_text(degraded_server.base_url, bank))
