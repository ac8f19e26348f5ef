"""hermes-core's memory-provider contract, checked against the real loopback server."""

from __future__ import annotations

from typing import Any

import pytest

from hermes_core.testing import MemoryProviderConformance


class TestHonchoConformance(MemoryProviderConformance):
    recalls_across_sessions = True
    tool_examples = {
        "honcho_profile": {},
        "honcho_search": {"query": "what does the user drink?"},
        "honcho_context": {"peer": "user"},
        "honcho_conclude": {"list": True},
        "honcho_reasoning": {"query": "what does the user drink?"},
    }

    @pytest.fixture
    def provider(self, make_provider: Any) -> Any:
        return make_provider()

    def settle(self, provider: Any) -> None:
        # sync_turn and queue_prefetch hand their work to the provider's own threads
        assert provider.wait_idle(10), "the provider's background work did not finish in 10 s"
