"""The plugin-author kit tested on throwaway plugins: fixtures, harness and conformance suites.

A conforming plugin passes the suites; broken plugins make the suite fail (checked with pytester).
"""

from __future__ import annotations

import os
import textwrap

import pytest

from hermes_core import (
    CompressionResult,
    ContextEngine,
    MemoryProvider,
    Tool,
    hookimpl,
)
from hermes_core.testing import (
    ContextEngineConformance,
    MemoryProviderConformance,
    isolated_home,
    make_host,
    make_instance,
    registered_plugin,
)

pytest_plugins = ["pytester"]


class KeyValueMemory(MemoryProvider):
    """A tiny provider that keeps turns in memory and recalls them by shared words."""

    name = "kv_memory"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.turns: list[str] = []
        self.ready: dict[str, str] = {}

    @hookimpl
    def sync_turn(self, user_message, assistant_message):
        self.turns.append(f"{user_message.content} / {assistant_message.content}")

    @hookimpl
    def queue_prefetch(self, query, session):
        words = set(query.lower().split())
        hits = [t for t in self.turns if words & set(t.lower().split())]
        self.ready[session.id] = "\n".join(hits[-3:])

    @hookimpl
    def prefetch(self, query, session):
        return self.ready.get(session.id) or None

    @hookimpl
    def get_tools(self):
        return [Tool(name="kv_count", description="How many turns are stored.",
                     parameters={"type": "object", "properties": {}},
                     handler=lambda args, ctx: {"turns": len(self.turns)})]


class TestKeyValueMemory(MemoryProviderConformance):
    recalls_across_sessions = True
    tool_examples = {"kv_count": {}}

    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance(KeyValueMemory, "memory-provider", hermes_home)


class KeepTail(ContextEngine):
    """Keeps the last user turn onwards; a minimal engine that respects the contract."""

    name = "keep_tail"

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        return (prompt_tokens or 0) > 1000

    @hookimpl
    def compress(self, messages, focus_topic, memory_context):
        starts = [i for i, m in enumerate(messages) if m.role == "user"]
        tail = messages[starts[-1]:] if starts else []
        answered = {m.tool_call_id for m in tail if m.role == "tool"}
        called = {c.id for m in tail for c in m.tool_calls}
        # drop calls without results and results without calls: the contract wants pairs
        tail = [m for m in tail
                if not (m.tool_calls and {c.id for c in m.tool_calls} - answered)
                and not (m.role == "tool" and m.tool_call_id not in called)]
        return CompressionResult(messages=tail, summary=None)


class TestKeepTail(ContextEngineConformance):
    threshold_tokens = 1000

    @pytest.fixture
    def engine(self, hermes_home):
        return make_instance(KeepTail, "context-engine", hermes_home)


def test_isolated_home_restores_environment(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "outer")
    with isolated_home("memory:\n  prefetch_timeout: 0.5\n") as home:
        assert os.environ["HERMES_CORE_HOME"] == str(home)
        assert "ANTHROPIC_API_KEY" not in os.environ
        assert make_host(home, builtins=False).config.core.memory.prefetch_timeout == 0.5
    assert os.environ["ANTHROPIC_API_KEY"] == "outer"
    assert not home.exists()


def test_registered_plugin_is_removed_afterwards(hermes_home):
    host = make_host(hermes_home, builtins=False)

    class Plug:
        @hookimpl
        def register_context_engines(self, register):
            register(KeepTail)

    with registered_plugin(host, Plug(), name="tmp") as record:
        assert record.registers == ["context-engine:keep_tail"]
        assert host.registries.context_engines.names() == ["keep_tail"]
    assert host.registries.context_engines.names() == []
    assert "tmp" not in host.records


def test_registered_plugin_fails_loudly_when_broken(hermes_home):
    host = make_host(hermes_home, builtins=False)

    class Broken:
        @hookimpl
        def register_tools(self, register):
            register("not a tool")

    with pytest.raises(AssertionError, match="failed to register"), \
            registered_plugin(host, Broken(), name="broken"):
        pass


def test_make_instance_validates_its_section(hermes_home):
    from pydantic import BaseModel, ConfigDict

    from hermes_core import ConfigError

    class Cfg(BaseModel):
        model_config = ConfigDict(extra="forbid")
        size: int = 1

    class Sized(MemoryProvider):
        name = "sized"
        Config = Cfg

    assert make_instance(Sized, "memory-provider", hermes_home, config="sized:\n  size: 3\n"
                         ).config.size == 3
    with pytest.raises(ConfigError, match=r"sized\.size"):
        make_instance(Sized, "memory-provider", hermes_home, config="sized:\n  size: big\n")


def test_fixtures_from_the_pytest11_plugin(hermes_home, hermes_host, hermes_messages_api):
    assert os.environ["HERMES_CORE_HOME"] == str(hermes_home)
    assert hermes_host.home == hermes_home
    assert hermes_messages_api.base_url.startswith("http://127.0.0.1:")


BROKEN_SUITES = """
import time
import pytest
from hermes_core import CompressionResult, ContextEngine, MemoryProvider, Message, hookimpl
from hermes_core.testing import ContextEngineConformance, MemoryProviderConformance, make_instance

class Slow(MemoryProvider):
    name = "slow"

    @hookimpl
    def prefetch(self, query):
        time.sleep(0.4)
        return 42  # not text either

class TestSlow(MemoryProviderConformance):
    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance(Slow, "memory-provider", hermes_home)

class Splitter(ContextEngine):
    name = "splitter"

    @hookimpl
    def should_compress(self, messages, prompt_tokens):
        return False

    @hookimpl
    def compress(self, messages, focus_topic, memory_context):
        # keeps only tool results: orphans them from their calls
        return CompressionResult(messages=[m for m in messages if m.role == "tool"])

class TestSplitter(ContextEngineConformance):
    @pytest.fixture
    def engine(self, hermes_home):
        return make_instance(Splitter, "context-engine", hermes_home)
"""


def test_the_suites_fail_broken_plugins(pytester):
    pytester.makepyfile(test_broken=textwrap.dedent(BROKEN_SUITES))
    result = pytester.runpytest("-q", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 5
    result.stdout.fnmatch_lines(["*TestSlow::test_prefetch_within_deadline*",
                                 "*TestSplitter::test_compress_keeps_alternation_and_tool_pairs*"])
