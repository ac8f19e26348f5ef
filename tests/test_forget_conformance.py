"""The forget conformance suite (hermes_core.testing.forget_suite) against the built-ins.

Kept in its own module until the lead folds ForgetConformance into MemoryProviderConformance.
"""

from __future__ import annotations

from typing import Any

import pytest

from hermes_core.hooks import ENGINE
from hermes_core.plugins.context_engine.lossless.engine import LosslessEngine
from hermes_core.plugins.memory.file_memory import FileMemory
from hermes_core.plugins.memory.session_archive import SessionArchiveProvider
from hermes_core.plugins.memory.skills import SkillsProvider
from hermes_core.testing import make_instance
from hermes_core.testing.conformance import CheckedHooks, _ok
from hermes_core.testing.forget_suite import ForgetConformance
from hermes_core.types import Message, Session


class TestFileMemoryForget(ForgetConformance):
    forgets = True

    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance(FileMemory, "memory-provider", hermes_home)

    def remember(self, provider: Any, hooks: CheckedHooks, session: Session) -> None:
        provider.store.add("user", self.forget_statement)  # the file memory learns by tool only


class TestSessionArchiveForget(ForgetConformance):
    forgets = True
    forget_search_tool = ("session_search", {"query": "moved spring"})

    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance(SessionArchiveProvider, "memory-provider", hermes_home)


class TestSkillsForget(ForgetConformance):
    forgets = True

    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance(SkillsProvider, "memory-provider", hermes_home)

    def remember(self, provider: Any, hooks: CheckedHooks, session: Session) -> None:
        provider.library.create("travel", self.forget_statement, "Book the train first.")


class TestLosslessForget(ForgetConformance):
    kind = ENGINE
    """A context engine keeps user data too: its search tool must forget."""

    forgets = True
    forget_search_tool = ("context_search", {"query": "moved spring"})

    @pytest.fixture
    def provider(self, hermes_home):
        return make_instance(LosslessEngine, "context-engine", hermes_home)

    def remember(self, provider: Any, hooks: CheckedHooks, session: Session) -> None:
        provider.store.add_span(provider.conversation, [Message("user", self.forget_statement)],
                                digest="a move")

    def recalled(self, provider: Any, hooks: CheckedHooks, previous: Session,
                 number: int) -> str:
        # the engine serves one conversation: search it without switching sessions
        from hermes_core.types import ToolContext

        tools = {t.name: t for batch in _ok(hooks, hooks.get_tools()) for t in (batch or [])}
        name, args = self.forget_search_tool or ("", {})
        return str(tools[name].invoke(dict(args), ToolContext(session=None)))
