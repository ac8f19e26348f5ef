"""The ``forget`` contract, as a conformance suite (to be merged into the memory-provider suite).

Subclass it like :class:`~hermes_core.testing.MemoryProviderConformance` - override the
``provider`` fixture - and set ``forgets = True``::

    class TestNotesForget(ForgetConformance):
        forgets = True

        @pytest.fixture
        def provider(self, hermes_home):
            return make_instance(Notes, "memory-provider", hermes_home)

What it checks, through a plugin manager exactly as the kernel calls the hook:

* a dry run reports the fact (``matched >= 1``, ``deleted == 0``, ``dry_run`` true) and deletes
  nothing: the fact is still recalled;
* a real run deletes it (``deleted >= 1``, or ``cannot_delete`` set for a provider declared
  ``deletes = False``) and afterwards the fact is no longer recalled - by ``prefetch`` in a later
  session, by ``system_prompt_block`` of a later session, or by the provider's search tool when
  ``forget_search_tool`` names one;
* a subject that matches nothing reports ``matched == 0`` (or returns ``None``), and raises
  nothing;
* a ``user:<key>`` scope never raises: the provider deletes that user's data or says in
  ``cannot_delete`` why it cannot.

How the fact gets in: :meth:`remember` plays one turn through ``on_message`` and ``sync_turn``
(what a conversation does). A provider that learns facts another way (the file memory stores only
what the memory tool writes) overrides :meth:`remember`. A provider that stores in the background
overrides ``settle``, as for the recall check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from ..hooks import MEMORY
from ..types import ForgetReport, Session, SwitchReason, ToolContext
from .conformance import CheckedHooks, _ok, play_turn

__all__ = ["ForgetConformance"]


class ForgetConformance:
    """The ``forget`` contract. Override :meth:`provider`; set ``forgets = True``."""

    #: the kind under test: a memory provider, or a context engine (``ENGINE``) keeping messages
    kind: ClassVar[str] = MEMORY
    #: the provider implements ``forget`` (the checks are skipped otherwise)
    forgets: ClassVar[bool] = False
    #: the backend can delete what matched (``False``: it reports ``cannot_delete`` instead)
    deletes: ClassVar[bool] = True
    #: the fact to remember, the subject to forget, and the query that would recall it
    forget_statement: ClassVar[str] = "I moved to Ljubljana in the spring of 2025"
    forget_subject: ClassVar[str] = "Ljubljana"
    forget_query: ClassVar[str] = "where did I move Ljubljana"
    #: a search tool to check too: (tool name, arguments); its answer must not mention the
    #: subject, so query other words of the statement (an answer may echo its query)
    forget_search_tool: ClassVar[tuple[str, dict[str, Any]] | None] = None

    @pytest.fixture
    def provider(self) -> Any:
        raise NotImplementedError("override the 'provider' fixture to return your provider")

    def settle(self, provider: Any) -> None:
        """Wait for background work of the last hook (see MemoryProviderConformance.settle)."""

    def remember(self, provider: Any, hooks: CheckedHooks, session: Session) -> None:
        """Store :attr:`forget_statement` the way a conversation would."""
        play_turn(hooks, session, self.forget_statement)
        self.settle(provider)

    def recalled(self, provider: Any, hooks: CheckedHooks, previous: Session,
                 number: int) -> str:
        """Everything a later session gets back for :attr:`forget_query`, as one text."""
        later = Session(id=f"forget-later-{number}", platform="test")
        _ok(hooks, hooks.on_session_switch(new_session=later, old_session=previous,
                                  reason=SwitchReason.NEW))
        _ok(hooks, hooks.queue_prefetch(query=self.forget_query, session=later))
        self.settle(provider)
        parts = [p for p in _ok(hooks, hooks.prefetch(query=self.forget_query, session=later)) if p]
        parts += [p for p in _ok(hooks, hooks.system_prompt_block(session=later)) if p]
        if self.forget_search_tool is not None:
            name, args = self.forget_search_tool
            tools = {t.name: t for batch in _ok(hooks, hooks.get_tools()) for t in (batch or [])}
            parts.append(tools[name].invoke(dict(args), ToolContext(session=later)))
        return "\n".join(str(p) for p in parts)

    @pytest.fixture
    def hooks(self, provider: Any) -> Iterator[CheckedHooks]:
        hooks = CheckedHooks(provider, self.kind)
        yield hooks
        hooks.shutdown(only=hooks.name)
        hooks.close()

    @pytest.fixture
    def session(self, hooks: CheckedHooks) -> Session:
        session = Session(id="forget-1", platform="test")
        _ok(hooks, hooks.on_session_switch(new_session=session, old_session=None, reason=SwitchReason.NEW))
        return session

    def _forget(self, hooks: CheckedHooks, subject: str, scope: str,
                dry_run: bool) -> ForgetReport | None:
        results = _ok(hooks, hooks.forget(subject=subject, scope=scope, dry_run=dry_run))
        assert len(results) <= 1, f"expected at most one report, got {results!r}"
        report = results[0] if results else None
        assert report is None or isinstance(report, ForgetReport), (
            f"forget must return a ForgetReport or None, not {type(report).__name__}")
        return report

    def _skip_unless_declared(self) -> None:
        if not self.forgets:
            pytest.skip("forgets is not declared")

    def test_forget_dry_run_then_real_run(self, provider: Any, hooks: CheckedHooks,
                                          session: Session) -> None:
        self._skip_unless_declared()
        self.remember(provider, hooks, session)
        needle = self.forget_subject.casefold()
        assert needle in self.recalled(provider, hooks, session, 1).casefold(), (
            "the fact was not recalled before forget; adjust remember/forget_query")
        plan = self._forget(hooks, self.forget_subject, "all", True)
        assert plan is not None and plan.matched >= 1 and plan.deleted == 0 and plan.dry_run
        assert needle in self.recalled(provider, hooks, session, 2).casefold(), (
            "a dry run deleted something")
        done = self._forget(hooks, self.forget_subject, "all", False)
        assert done is not None and not done.dry_run
        if not self.deletes:
            assert done.cannot_delete, "a provider that cannot delete must say why"
            return
        assert done.deleted >= 1
        self.settle(provider)
        left = self.recalled(provider, hooks, session, 3)
        assert needle not in left.casefold(), f"still recalled after forget: {left[:300]!r}"

    def test_forget_nothing_matched(self, provider: Any, hooks: CheckedHooks,
                                    session: Session) -> None:
        self._skip_unless_declared()
        report = self._forget(hooks, "no-such-subject-qz7", "all", False)
        assert report is None or (report.matched == 0 and report.deleted == 0)

    def test_forget_user_scope_never_raises(self, provider: Any, hooks: CheckedHooks,
                                            session: Session) -> None:
        self._skip_unless_declared()
        report = self._forget(hooks, self.forget_subject, "user:conformance-user", True)
        assert report is None or isinstance(report, ForgetReport)
        json.dumps([] if report is None else report.items)  # items are plain text
