"""Conformance suites: the contract every memory provider and context engine must keep.

Subclass a suite in your test module, override its one factory fixture, and declare what your
plugin supports with class attributes; pytest runs every check against your plugin::

    import pytest
    from hermes_core.testing import MemoryProviderConformance, make_instance

    class TestNotes(MemoryProviderConformance):
        @pytest.fixture
        def provider(self, hermes_home):
            return make_instance(Notes, "memory-provider", hermes_home)

The checks are black-box: they call your instance through a plugin manager, exactly as the kernel
does, so a hook whose arguments do not match the spec fails here too. A capability you declare
``False`` skips its checks instead of failing them. New checks are added with a capability flag that
defaults to off, so upgrading hermes-core does not break a plugin's CI.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from .._checks import check_hooks
from ..config import HooksSection
from ..hooks import ENGINE, MEMORY, MODULE, HookOutcome, HookProblem, Hooks, values
from ..host import create_plugin_manager
from ..kinds import Tool
from ..types import (
    CompressionResult,
    EndReason,
    MemoryWrite,
    Message,
    Session,
    SwitchReason,
    ToolCall,
    ToolContext,
    Usage,
)

__all__ = [
    "ContextEngineConformance",
    "MemoryProviderConformance",
    "assert_well_formed",
    "build_conversation",
]

ODD_INPUTS = {
    "empty": "",
    "unicode": "naïve café — 東京で会いましょう 🚀 \u202edesrever\u202c \u200b zero-width",
    "huge": "lorem ipsum dolor sit amet " * 40_000,  # about 1 MB
}


#: the session the engine suite compacts
CONFORMANCE_SESSION = Session(id="conformance-engine", platform="test")


class CheckedHooks(Hooks):
    """The kernel's facade over one instance under test; :meth:`raise_problems` fails the test
    with what an implementation raised, was late with, or returned wrongly."""

    def __init__(self, instance: object, kind: str) -> None:
        pm = create_plugin_manager()
        self.name = f"{kind}:under-test"
        errors = [c.message for c in check_hooks(instance, kind, pm, label="the plugin under test")
                  if c.severity == "error"]
        assert not errors, "\n".join(errors)
        pm.register(instance, name=self.name)
        #: multiplies every hook's deadline: raised where a test checks what a hook does with
        #: an input, not how fast (latency has its own tests: test_prefetch_within_deadline)
        self.timeout_scale = 1.0
        defaults = HooksSection()
        super().__init__(pm, kind_of=lambda n: kind if n == self.name else MODULE,
                         timeout_of=lambda hook: defaults.timeout(hook) * self.timeout_scale)
        self.seen: list[HookProblem] = []
        self.subscribe(self.seen.append)
        self.implemented_hooks = {c.name for c in pm.get_hookcallers(instance) or ()}

    def raise_problems(self) -> None:
        problems, self.seen[:] = list(self.seen), []
        for problem in problems:
            if problem.error is not None:
                raise problem.error
        if problems:
            raise AssertionError(problems[0].message)


def _ok(hooks: CheckedHooks, outcomes: list[HookOutcome]) -> list[Any]:
    hooks.raise_problems()
    return values(outcomes)


def play_turn(hooks: CheckedHooks, session: Session, text: str, reply: str = "Noted.", *,
              end: bool = True) -> None:
    """One user turn as a conversation plays it: both messages (``on_message``), ``sync_turn``,
    and with ``end`` the session's ``on_session_end``; fails on any hook problem."""
    user, assistant = Message("user", text), Message("assistant", reply)
    _ok(hooks, hooks.on_message(message=user, session=session))
    _ok(hooks, hooks.on_message(message=assistant, session=session))
    _ok(hooks, hooks.sync_turn(user_message=user, assistant_message=assistant, session=session,
                               messages=[user, assistant]))
    if end:
        _ok(hooks, hooks.on_session_end(session=session, messages=[user, assistant],
                                        reason=EndReason.USER_EXIT))


def _only(results: list[Any]) -> Any:
    assert len(results) <= 1, f"expected at most one result, got {results!r}"
    return results[0] if results else None


def _check_tools(tools: Any, examples: dict[str, dict[str, Any]]) -> None:
    import jsonschema

    assert isinstance(tools, list), f"get_tools must return a list, got {type(tools).__name__}"
    names = [t.name for t in tools]
    assert len(names) == len(set(names)), f"duplicate tool names: {names}"
    for tool in tools:
        assert isinstance(tool, Tool), f"get_tools returned {tool!r}, not a hermes_core.Tool"
        schema = tool.input_schema()
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema.get("type") == "object", f"{tool.name}: the input schema must be an object"
        assert tool.description.strip(), f"{tool.name}: the model needs a description"
    for name, args in examples.items():
        tool = next((t for t in tools if t.name == name), None)
        assert tool is not None, f"tool_examples names {name!r}, which get_tools does not offer"
        out = tool.invoke(args, ToolContext(session=Session(id="conformance")))
        json.loads(out)  # handlers answer JSON


def build_conversation(turns: int, *, tool_every: int = 3, size: int = 400) -> list[Message]:
    """A user/assistant conversation with tool calls and results, for engine checks."""
    out: list[Message] = []
    for i in range(turns):
        out.append(Message("user", f"request {i}: please look at file src/mod_{i}.py " + "x" * size))
        if i % tool_every == 0:
            call = ToolCall(id=f"call_{i}", name="read_file", arguments={"path": f"src/mod_{i}.py"})
            out.append(Message("assistant", "", tool_calls=[call]))
            out.append(Message("tool", "def f():\n    return 1\n" * (size // 20),
                               tool_call_id=call.id, tool_name="read_file"))
        out.append(Message("assistant", f"answer {i}: done " + "y" * size))
    return out


def assert_well_formed(messages: list[Message]) -> None:
    """User/assistant alternate (tool results count as the user side) and tool calls pair up."""
    roles: list[str] = []
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        assert msg.role in ("user", "assistant", "tool"), f"message {i}: role {msg.role!r}"
        if msg.role == "tool":
            assert msg.tool_call_id in pending, (
                f"message {i}: tool result {msg.tool_call_id!r} answers no open tool call")
            pending.discard(msg.tool_call_id)
            side = "user"
        else:
            assert not pending, f"message {i}: tool calls {sorted(pending)} got no result"
            side = msg.role
            if msg.role == "assistant":
                pending = {c.id for c in msg.tool_calls}
        if roles and roles[-1] == side and not (side == "user" and msg.role == "tool"
                                                 and messages[i - 1].role == "tool"):
            raise AssertionError(f"message {i}: two {side} turns in a row")
        roles.append(side)
    assert not pending, f"tool calls {sorted(pending)} got no result"


class MemoryProviderConformance:
    """The memory-provider contract. Override :meth:`provider`; set the flags that apply."""

    #: the deadline prefetch must meet (the kernel's default ``memory.prefetch_timeout``)
    prefetch_deadline: ClassVar[float] = 0.3
    #: arguments for tools whose handlers the suite may call: {tool name: {arg: value}}
    tool_examples: ClassVar[dict[str, dict[str, Any]]] = {}
    #: the provider can recall a stored turn in a later session (checked through prefetch):
    #: after a turn whose user message is ``recall_statement``, a later session's prefetch for
    #: ``recall_query`` must contain ``recall_expect`` (case-insensitive)
    recalls_across_sessions: ClassVar[bool] = False
    recall_statement: ClassVar[str] = "I fixed the database hang by raising the pool size to 40"
    recall_query: ClassVar[str] = "database hang pool size"
    recall_expect: ClassVar[str] = "pool"
    #: facts stated in one session are recalled by a reworded question (no shared word) from a
    #: later one: through ``prefetch``, or through the tool named by ``paraphrase_tool``
    recalls_paraphrases: ClassVar[bool] = False
    paraphrase_tool: ClassVar[str | None] = None

    @pytest.fixture
    def provider(self) -> Any:
        raise NotImplementedError(
            "override the 'provider' fixture to return an instance of your provider, e.g. "
            "make_instance(MyProvider, 'memory-provider', hermes_home)")

    def settle(self, provider: Any) -> None:
        """Wait until background work started by the last hook has finished.

        The kernel runs ``sync_turn`` and ``queue_prefetch`` on a worker and never waits for
        them; a provider that hands work to its own threads or to a server overrides this to
        wait for it (with a bound), so the recall check sees the stored turn. The default does
        nothing: a synchronous provider is settled when its hook returns.
        """

    @pytest.fixture
    def hooks(self, provider: Any) -> Iterator[CheckedHooks]:
        hooks = CheckedHooks(provider, MEMORY)
        yield hooks
        hooks.shutdown(only=hooks.name)
        hooks.close()
        hooks.raise_problems()

    @pytest.fixture
    def session(self, hooks: CheckedHooks) -> Session:
        session = Session(id="conformance-1", platform="test")
        _ok(hooks, hooks.on_session_switch(new_session=session, old_session=None,
                                           reason=SwitchReason.NEW))
        return session

    def test_implements_lifecycle_hooks(self, provider: Any) -> None:
        from ..hookspecs import MEMORY_HOOKS, TOOL_HOOKS

        implemented = CheckedHooks(provider, MEMORY).implemented_hooks
        assert implemented & set(MEMORY_HOOKS + TOOL_HOOKS), "implements no memory hook"
        assert isinstance(getattr(type(provider), "name", None), str)

    def test_system_prompt_block_is_text_and_stable(self, hooks: CheckedHooks,
                                                    session: Session) -> None:
        first = _only(_ok(hooks, hooks.system_prompt_block(session=session)))
        assert first is None or isinstance(first, str)
        _ok(hooks, hooks.on_message(message=Message("user", "remember that I like tea"), session=session))
        again = _only(_ok(hooks, hooks.system_prompt_block(session=session)))
        assert again == first, "the block must be a frozen snapshot within a session"

    @pytest.mark.parametrize("kind", sorted(ODD_INPUTS))
    def test_prefetch_odd_input(self, hooks: CheckedHooks, session: Session, kind: str) -> None:
        value = _only(_ok(hooks, hooks.prefetch(query=ODD_INPUTS[kind], session=session)))
        assert value is None or isinstance(value, str)

    def test_prefetch_within_deadline(self, hooks: CheckedHooks, session: Session) -> None:
        _ok(hooks, hooks.queue_prefetch(query="what do I like to drink?", session=session))
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            _ok(hooks, hooks.prefetch(query="what do I like to drink?", session=session))
            samples.append(time.perf_counter() - start)
        assert statistics.median(samples) < self.prefetch_deadline, (
            f"prefetch took {statistics.median(samples):.3f} s (median); serve what "
            "queue_prefetch prepared instead of doing I/O")

    @pytest.mark.parametrize("kind", sorted(ODD_INPUTS))
    def test_turn_hooks_odd_input(self, hooks: CheckedHooks, session: Session,
                                  kind: str) -> None:
        user = Message("user", ODD_INPUTS[kind])
        assistant = Message("assistant", ODD_INPUTS[kind])
        if kind == "huge":  # a 1 MB message may take a loaded database past on_message's 2 s:
            hooks.timeout_scale = 10.0  # that is lateness (logged, the turn goes on), not failure
        _ok(hooks, hooks.on_message(message=user, session=session))
        _ok(hooks, hooks.on_message(message=assistant, session=session))
        _ok(hooks, hooks.sync_turn(user_message=user, assistant_message=assistant, session=session,
                          messages=[user, assistant]))
        _ok(hooks, hooks.queue_prefetch(query=user.content, session=session))
        texts = _ok(hooks, hooks.on_pre_compress(messages=[user, assistant], session=session))
        assert all(t is None or isinstance(t, str) for t in texts)

    def test_session_switch_and_end(self, hooks: CheckedHooks, session: Session) -> None:
        user, assistant = Message("user", "my name is Ada"), Message("assistant", "hello Ada")
        _ok(hooks, hooks.on_message(message=user, session=session))
        _ok(hooks, hooks.on_message(message=assistant, session=session))
        _ok(hooks, hooks.sync_turn(user_message=user, assistant_message=assistant, session=session,
                          messages=[user, assistant]))
        child = Session(id="conformance-2", platform="test", parent_session_id=session.id)
        _ok(hooks, hooks.on_session_switch(new_session=child, old_session=session,
                                  reason=SwitchReason.COMPRESSION))
        _ok(hooks, hooks.on_session_end(session=child, messages=[user, assistant],
                               reason=EndReason.USER_EXIT))
        fresh = Session(id="conformance-3", platform="test")
        _ok(hooks, hooks.on_session_switch(new_session=fresh, old_session=child, reason=SwitchReason.NEW))
        block = _only(_ok(hooks, hooks.system_prompt_block(session=fresh)))
        assert block is None or isinstance(block, str)

    def test_recall_across_sessions(self, provider: Any, hooks: CheckedHooks,
                                    session: Session) -> None:
        if not self.recalls_across_sessions:
            pytest.skip("recalls_across_sessions is not declared")
        play_turn(hooks, session, self.recall_statement)
        self.settle(provider)
        later = Session(id="conformance-later", platform="test")
        _ok(hooks, hooks.on_session_switch(new_session=later, old_session=session, reason=SwitchReason.NEW))
        _ok(hooks, hooks.queue_prefetch(query=self.recall_query, session=later))
        self.settle(provider)
        recalled = _only(_ok(hooks, hooks.prefetch(query=self.recall_query, session=later))) or ""
        assert self.recall_expect.lower() in recalled.lower(), f"not recalled: {recalled!r}"

    def test_recall_by_meaning(self, provider: Any, hooks: CheckedHooks) -> None:
        if not self.recalls_paraphrases:
            pytest.skip("recalls_paraphrases is not declared")
        from .paraphrase import check_paraphrase_recall

        check_paraphrase_recall(hooks, settle=lambda: self.settle(provider),
                                tool=self.paraphrase_tool)
        hooks.raise_problems()

    @pytest.mark.parametrize("action", ["add", "replace", "remove"])
    def test_on_memory_write(self, hooks: CheckedHooks, session: Session, action: str) -> None:
        _ok(hooks, hooks.on_memory_write(write=MemoryWrite(action, "user", "prefers tea", old_text="tea",  # type: ignore[arg-type]
                                                  session_id=session.id, provider="someone-else")))

    def test_tools_are_valid(self, hooks: CheckedHooks, session: Session) -> None:
        tools = [t for batch in _ok(hooks, hooks.get_tools()) for t in (batch or [])]
        _check_tools(tools, self.tool_examples)


class ContextEngineConformance:
    """The context-engine contract. Override :meth:`engine`; set the flags that apply."""

    #: the prompt size (tokens) at which should_compress must turn True; None skips that check
    threshold_tokens: ClassVar[int | None] = None
    #: the engine shrinks a long history (a lossless engine may still shrink the live context)
    shrinks_history: ClassVar[bool] = True

    @pytest.fixture
    def engine(self) -> Any:
        raise NotImplementedError(
            "override the 'engine' fixture to return an instance of your engine, e.g. "
            "make_instance(MyEngine, 'context-engine', hermes_home)")

    @pytest.fixture
    def hooks(self, engine: Any) -> Iterator[CheckedHooks]:
        hooks = CheckedHooks(engine, ENGINE)
        yield hooks
        hooks.close()
        hooks.raise_problems()

    def _compress(self, hooks: CheckedHooks, messages: list[Message],
                  focus: str | None = None) -> CompressionResult:
        result = hooks.compress(messages=messages, focus_topic=focus, memory_context="",
                                session=CONFORMANCE_SESSION)
        hooks.raise_problems()
        assert isinstance(result, CompressionResult), f"compress returned {result!r}"
        assert all(isinstance(m, Message) for m in result.messages)
        assert all(isinstance(n, str) for n in result.notices)
        return result

    def test_implements_engine_hooks(self, engine: Any) -> None:
        implemented = CheckedHooks(engine, ENGINE).implemented_hooks
        assert {"should_compress", "compress"} <= implemented

    def test_short_history_needs_no_compression(self, hooks: CheckedHooks) -> None:
        messages = [Message("user", "hi"), Message("assistant", "hello")]
        assert hooks.should_compress(messages=messages, prompt_tokens=None, session=None) in (False, None)
        assert hooks.should_compress(messages=messages, prompt_tokens=10, session=None) in (False, None)

    def test_should_compress_agrees_with_threshold(self, hooks: CheckedHooks) -> None:
        if self.threshold_tokens is None:
            pytest.skip("threshold_tokens is not declared")
        messages = build_conversation(4)
        below = hooks.should_compress(messages=messages, prompt_tokens=self.threshold_tokens - 1,
                                        session=None)
        above = hooks.should_compress(messages=messages, prompt_tokens=self.threshold_tokens + 1,
                                        session=None)
        assert (bool(below), bool(above)) == (False, True)

    @pytest.mark.parametrize("turns", [60, 300])
    def test_compress_keeps_alternation_and_tool_pairs(self, hooks: CheckedHooks,
                                                       turns: int) -> None:
        history = build_conversation(turns)
        result = self._compress(hooks, history, focus="the database")
        assert_well_formed(result.messages)
        assert result.messages, "compress returned an empty history"
        last_user = next(m for m in reversed(history) if m.role == "user")
        assert any(last_user.content in m.content for m in result.messages if m.role == "user"), (
            "the latest user request must survive a compaction")
        if self.shrinks_history and turns >= 300:
            before = sum(len(m.content) for m in history)
            assert sum(len(m.content) for m in result.messages) < before

    def test_compress_repairs_broken_tool_pairs(self, hooks: CheckedHooks) -> None:
        history = build_conversation(40)
        orphan = Message("tool", "orphaned result", tool_call_id="nobody", tool_name="x")
        history.insert(5, orphan)
        dangling = Message("assistant", "", tool_calls=[ToolCall("lost", "read_file", {})])
        history.insert(-1, dangling)
        result = self._compress(hooks, history)
        assert_well_formed(result.messages)

    @pytest.mark.parametrize("kind", ["empty", "unicode", "large"])
    def test_compress_odd_input(self, hooks: CheckedHooks, kind: str) -> None:
        # "large" is about 50k tokens: big, but inside any real context window
        text = {"empty": "", "unicode": ODD_INPUTS["unicode"], "large": "lorem ipsum " * 17_000}
        history = [] if kind == "empty" else [Message("user", text[kind]),
                                              Message("assistant", text[kind])]
        self._compress(hooks, history)
        assert hooks.should_compress(messages=history, prompt_tokens=None,
                                       session=None) in (True, False, None)

    def test_message_larger_than_any_window(self, hooks: CheckedHooks) -> None:
        """A single message no compaction can fit: a result, or an error that says so."""
        from ..errors import HermesCoreError

        history = [Message("user", ODD_INPUTS["huge"] * 4), Message("assistant", "ok")]
        try:
            self._compress(hooks, history)
        except HermesCoreError as exc:
            assert str(exc), "the error must say what is wrong"

    def test_update_from_response(self, hooks: CheckedHooks) -> None:
        _ok(hooks, hooks.update_from_response(usage=Usage(input_tokens=1000, output_tokens=50,
                                                 cache_read_tokens=200, cache_write_tokens=10)))

    def test_tools_are_valid(self, hooks: CheckedHooks) -> None:
        tools = [t for batch in _ok(hooks, hooks.get_tools()) for t in (batch or [])]
        _check_tools(tools, {})

    def test_describe_context_is_a_plan_that_changes_nothing(self, hooks: CheckedHooks) -> None:
        """``hermes-core context show/estimate`` print this plan: the required keys, JSON-able,
        and describing leaves the history (and the engine's verdict) as they were."""
        if "describe_context" not in hooks.implemented_hooks:
            pytest.skip("the engine does not implement describe_context")
        history = build_conversation(120)
        copy = list(history)
        before = hooks.should_compress(messages=history, prompt_tokens=None, session=None)
        plan = hooks.describe_context(messages=history, session=CONFORMANCE_SESSION)
        hooks.raise_problems()  # a missing or mistyped key is reported by the kernel's check
        assert plan is not None, "describe_context returned None"
        assert plan["messages"] == len(history) and plan["lines"], plan
        assert history == copy, "describe_context changed the history it was given"
        assert hooks.should_compress(messages=history, prompt_tokens=None, session=None) == before
        empty = hooks.describe_context(messages=[], session=None)
        hooks.raise_problems()
        assert empty is None or empty["messages"] == 0
