"""The agent's own hooks (``on_turn_begin``, ``tool_batch_note``, ``pre_compaction_flush``,
``on_turn_end``, ``on_agent_reset``, ``on_agent_close``), and the built-in ``memory_review`` that
takes part in a conversation through them.

Real hosts and a real Agent; throwaway plugin modules record what the kernel hands them. The only
fake is the model's words (ScriptLLM).
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import pytest
from agent_support import CallLog, ScriptLLM, engine_class, make_host, note_tool, reply, tool_reply

from hermes_core import PluginHost, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.results import CurationReport, TurnEndNote


class Watcher:
    """A plugin module implementing the agent's hooks; records what it was handed."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    @hookimpl
    def on_turn_begin(self, agent):
        self.events.append(("begin", len(agent.history)))

    @hookimpl
    def tool_batch_note(self, agent, calls):
        self.events.append(("note", [c.name for c in calls]))
        return "[watcher: keep notes short]"

    @hookimpl
    def pre_compaction_flush(self, agent, messages):
        self.events.append(("flush", len(messages)))
        return CurationReport("flush", agent.session.id, calls=1, writes=["kept one thing"])

    @hookimpl
    def on_turn_end(self, agent, result):
        self.events.append(("end", result.reply))
        return TurnEndNote([f"watcher saw {result.reply!r}"])

    @hookimpl
    def on_agent_reset(self, agent):
        self.events.append(("reset", agent.session.id))

    @hookimpl
    def on_agent_close(self, agent):
        self.events.append(("close", agent.session.id))

    def names(self) -> list[str]:
        return [name for name, _ in self.events]


def _agent(home, script, *, engine=None, tools=()) -> tuple[Agent, Watcher, ScriptLLM]:
    watcher = Watcher()
    host = make_host(home, engine=engine, tools=tools, extra_plugins=[("watcher", watcher)])
    llm = ScriptLLM(script)
    return Agent(host, llm), watcher, llm


def test_hook_on_turn_begin(home):
    agent, watcher, _llm = _agent(home, [reply("one"), reply("two")])
    agent.run_turn("hello")
    agent.run_turn("again")
    agent.close()
    # once per turn, before the turn's user message joins the history
    assert [e for e in watcher.events if e[0] == "begin"] == [("begin", 0), ("begin", 2)]


def test_hook_tool_batch_note(home):
    saved: list[str] = []
    agent, watcher, llm = _agent(home, [tool_reply(("note", {"text": "a"})), reply("done")],
                                 tools=[note_tool(saved)])
    agent.run_turn("save a")
    agent.close()
    assert ("note", ["note"]) in watcher.events
    result = [m for m in agent.history if m.role == "tool"][-1]
    assert result.content.endswith("\n\n[watcher: keep notes short]")
    # the model read it with the result, the system prompt unchanged
    assert llm.calls[1]["messages"][-1].content == result.content
    assert llm.calls[0]["system"] == llm.calls[1]["system"]


def test_hook_pre_compaction_flush(home):
    log = CallLog()
    agent, watcher, _llm = _agent(home, [reply("one"), reply("two")], engine=engine_class(log))
    agent.run_turn("hello")
    agent.run_turn("again")
    record = agent.compact()
    agent.close()
    assert record is not None and record.flush is not None
    assert record.flush.writes == ["kept one thing"] and record.flush.kind == "flush"
    # with the history as it was before the compaction, and before the engine saw it
    assert ("flush", 4) in watcher.events
    assert not [m for m in agent.history if "kept one thing" in m.content]


def test_hook_on_turn_end(home):
    agent, watcher, _llm = _agent(home, [reply("one")])
    result = agent.run_turn("hello")
    agent.close()
    assert ("end", "one") in watcher.events
    assert result.notices == ["watcher saw 'one'"]
    assert result.review_started is False  # no plugin queued work that it announced


def test_hook_on_agent_reset(home):
    agent, watcher, _llm = _agent(home, [reply("one")])
    agent.run_turn("hello")
    new = agent.new_session()
    agent.close()
    assert ("reset", new.id) in watcher.events  # on the new session


def test_hook_on_agent_close(home):
    agent, watcher, _llm = _agent(home, [reply("one")])
    agent.run_turn("hello")
    agent.close()
    agent.close()  # a second close does nothing
    assert watcher.names().count("close") == 1
    other, watcher2, _ = _agent(home, [reply("two")])
    other.run_turn("hi")
    other.discard()  # an agent dropped without ending its session still bounds its work
    assert watcher2.names().count("close") == 1


# ----------------------------------------------------------------- the built-in memory_review


def _loaded(home, plugins_section: str = "", *, builtins: bool = False) -> PluginHost:
    config = parse_config_text(f"memory:\n  providers: []\ncontext:\n  engine: none\n{plugins_section}",
                               home / "config.yaml")
    return PluginHost.load(home, config=config, builtins=builtins, entry_points=False,
                           directories=False)


def test_the_memory_review_is_loaded_by_default_even_without_the_builtins(home):
    host = _loaded(home)
    assert host.records["memory_review"].enabled and host.records["memory_review"].source == "builtin"
    assert "on_turn_end" in host.records["memory_review"].hooks
    assert [name for name in host.records] == ["memory_review"]  # no other built-in
    # an allow-list applies to it as to any plugin: naming it keeps it
    host = _loaded(home, "plugins:\n  enabled_only: [file_memory, memory_review]\n", builtins=True)
    assert host.records["memory_review"].enabled
    assert not host.records["skills"].enabled
    host = _loaded(home, "plugins:\n  enabled_only: [file_memory]\n", builtins=True)
    assert not host.records["memory_review"].enabled


def test_an_allow_list_leaving_out_the_memory_review_says_so(home):
    """An enabled_only list written before the review was a plugin turns it off: its record
    (plugins list, doctor) warns, unless plugins.disabled names it too."""
    host = _loaded(home, "plugins:\n  enabled_only: [file_memory]\n", builtins=True)
    record = host.records["memory_review"]
    assert not record.enabled
    assert len(record.warnings) == 1 and "plugins.enabled_only" in record.warnings[0]
    assert "add memory_review to plugins.enabled_only" in record.warnings[0]
    assert not host.records["skills"].warnings  # not an essential plugin: left out quietly
    for section in ("plugins:\n  enabled_only: [file_memory]\n  disabled: [memory_review]\n",
                    "plugins:\n  enabled_only: [file_memory, memory_review]\n"):
        assert not _loaded(home, section, builtins=True).records["memory_review"].warnings


def test_disabling_the_memory_review_turns_off_the_review_flush_and_nudge(home):
    host = _loaded(home, "plugins:\n  disabled: [memory_review]\n")
    assert not host.records["memory_review"].enabled
    assert host.hooks.implemented(host.pm.hook.on_turn_end) == []


def _review_host(home, memory: str = "") -> PluginHost:
    """A host whose file memory offers the memory tool and whose review is due every turn
    (``memory``: more lines of the memory section)."""
    from hermes_core.plugins.memory.file_memory import FileMemory

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register):
            register(FileMemory)

    text = ("memory:\n  providers: [file_memory]\n  nudge_interval: 1\n  flush_min_turns: 0\n"
            f"{memory}context:\n  engine: none\n")
    host = PluginHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                           builtins=False, entry_points=False, directories=False,
                           plugins=[("test_plugins", Registrar())])
    host.activate_memory_providers()
    return host


def test_the_review_runs_on_the_plugins_lane_not_a_thread_of_its_own(home):
    """A due review is queued with PluginHost.run_later on the plugin's disposable lane."""
    threads: list[str] = []
    seen = threading.Event()

    class Aux:
        def respond(self, **kwargs):
            threads.append(threading.current_thread().name)
            seen.set()
            from hermes_core.llm import LLMResponse
            return LLMResponse("Nothing to save.")

    agent = Agent(_review_host(home), ScriptLLM([reply("one")]), aux_llm=Aux())
    result = agent.run_turn("hello")
    assert result.review_started
    assert agent.curator.wait(10) and seen.is_set()
    agent.close()
    assert agent.curator.reports[-1].kind == "review" and agent.curator.reports[-1].calls == 1
    assert threads and threads[0] != threading.current_thread().name
    assert threads[0].startswith("hermes-lane-") and "memory_review" in threads[0]


def test_the_review_keeps_no_conversation_alive_from_its_module(home):
    """The review's state goes with the agent: nothing the plugin module holds reaches a closed
    conversation's host. (A module-level table keyed weakly by the agent held each host until a
    garbage collection removed the agent's entry and a second one freed the host: the unit suite
    ended at twice the memory.)"""
    import gc
    import sys
    import types
    import weakref

    class Aux:
        def respond(self, **kwargs):
            from hermes_core.llm import LLMResponse
            return LLMResponse("Nothing to save.")

    def converse() -> weakref.ref[PluginHost]:
        host = _review_host(home)
        agent = Agent(host, ScriptLLM([reply("one")]), aux_llm=Aux())
        assert agent.run_turn("hello").review_started
        assert agent.curator.wait(10)
        agent.close()
        host.shutdown()
        return weakref.ref(host)

    host = converse()
    module = sys.modules["hermes_core.plugins.memory_review"]
    namespaces = {id(vars(m)) for m in list(sys.modules.values()) if m is not None}
    seen: set[int] = set()
    todo: list[object] = [vars(module)]
    while todo:  # everything the module's namespace reaches, other modules' excepted
        value = todo.pop()
        if id(value) in seen or isinstance(value, (types.ModuleType, type)):
            continue
        seen.add(id(value))
        assert value is not host(), "the memory review's module keeps a closed conversation's host"
        todo.extend(v for v in gc.get_referents(value)
                    if not (isinstance(v, dict) and id(v) in namespaces))


def test_the_old_curation_names_warn_and_hand_over_the_plugins():
    import hermes_core.curation as old
    from hermes_core import _compacting, results
    from hermes_core.plugins.memory_review import curator

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert old.Curator is curator.Curator
        assert old.review_session is curator.review_session
        assert old.carry_over is _compacting.carry_over
        assert old.CurationReport is results.CurationReport
    assert len(caught) == 4 and all(w.category is DeprecationWarning for w in caught)
    assert "hermes_core.plugins.memory_review.curator.Curator" in str(caught[0].message)
    with pytest.raises(AttributeError):
        old.Nothing  # noqa: B018


def test_a_review_waiting_on_its_lane_past_its_bound_writes_nothing_and_frees_the_next(home):
    """The review's bound counts from when it was queued, as a thread started then would have:
    one still waiting on the plugin's lane after it makes no model call, and a review due
    meanwhile is not held back by it (it runs after, within its own bound)."""
    asked: list[int] = []

    class Aux:
        def respond(self, **kwargs):
            asked.append(1)
            from hermes_core.llm import LLMResponse
            return LLMResponse("Nothing to save.")

    host = _review_host(home, "  review_timeout: 1.0\n")
    agent = Agent(host, ScriptLLM([reply("one"), reply("two")]), aux_llm=Aux())
    agent.start()
    gate, holding = threading.Event(), threading.Event()

    def hold() -> None:  # something else of the plugin's keeps the conversation's lane busy
        holding.set()
        gate.wait(10)

    assert host.run_later(hold, "hold", plugin="memory_review", kind="disposable",
                          session=agent.session)
    assert holding.wait(5)
    assert agent.run_turn("hello").review_started
    deadline = agent.curator._deadline
    while time.monotonic() <= deadline:  # the queued review's bound passes while it waits
        time.sleep(0.01)
    assert not agent.curator.busy
    assert agent.run_turn("again").review_started  # the next due review is not held back
    gate.set()
    assert agent.curator.wait(10)
    agent.close()
    # the first started after its bound: no model call; the second, within its own, ran
    assert [(r.timed_out, r.calls) for r in agent.curator.reports] == [(True, 0), (False, 1)]
    assert asked == [1]


# ------------------------------------------------- a hung implementation under the hooks' deadlines

DEADLINE = 2.0  #: each agent hook's deadline in these tests (hooks.timeouts)
SLACK = 8.0  #: generous: a loaded machine, never a tight timing (a hung hook would take HANG)
HANG = 30.0  #: how long a hung implementation waits unless released
DRAIN = 1.0  #: memory.worker_drain_timeout: close waits this long for late calls, as for any hook


class Hanger:
    """A third-party plugin module whose implementation of one agent hook hangs until released."""

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self.release = threading.Event()
        self.entered = threading.Event()
        self.finished = threading.Event()
        self.calls = 0

    def _maybe_hang(self, hook: str, answer: Any = None) -> Any:
        if hook != self.hook:
            return None
        self.calls += 1
        self.entered.set()
        try:
            self.release.wait(HANG)
            return answer
        finally:
            self.finished.set()

    @hookimpl
    def on_turn_begin(self, agent):
        return self._maybe_hang("on_turn_begin")

    @hookimpl
    def tool_batch_note(self, agent, calls):
        return self._maybe_hang("tool_batch_note", "[hanger: a late note]")

    @hookimpl
    def pre_compaction_flush(self, agent, messages):
        return self._maybe_hang("pre_compaction_flush",
                                CurationReport("flush", agent.session.id, writes=["late"]))

    @hookimpl
    def on_turn_end(self, agent, result):
        return self._maybe_hang("on_turn_end", TurnEndNote(["a late notice"], True))

    @hookimpl
    def on_agent_reset(self, agent):
        return self._maybe_hang("on_agent_reset")

    @hookimpl
    def on_agent_close(self, agent):
        return self._maybe_hang("on_agent_close")


def _hung(home, hook: str, script, extra=()) -> tuple[Agent, Hanger, list[str]]:
    """An agent beside a plugin hung in ``hook``, with the memory review due every turn."""
    from hermes_core.llm import LLMResponse
    from hermes_core.plugins.memory.file_memory import FileMemory

    asked: list[str] = []

    class Aux:
        def respond(self, **kwargs):
            asked.append(kwargs["messages"][-1].content)
            return LLMResponse("Nothing to save.")

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register):
            register(FileMemory)

        @hookimpl
        def register_context_engines(self, register):
            register(engine_class(CallLog()))

        @hookimpl
        def register_tools(self, register):
            register(note_tool([]))

    hanger = Hanger(hook)
    timeouts = "".join(f"    {name}: {DEADLINE}\n" for name in (
        "on_turn_begin", "tool_batch_note", "pre_compaction_flush", "on_turn_end",
        "on_agent_reset", "on_agent_close"))
    text = ("memory:\n  providers: [file_memory]\n  nudge_interval: 1\n  flush_min_turns: 0\n"
            f"  worker_drain_timeout: {DRAIN}\ncontext:\n  engine: test_engine\n"
            f"hooks:\n  timeouts:\n{timeouts}")
    host = PluginHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                           builtins=False, entry_points=False, directories=False,
                           plugins=[("test_plugins", Registrar()), ("hanger", hanger), *extra])
    host.activate_memory_providers()
    host.activate("context-engine", "test_engine", config_key="context.engine")
    return Agent(host, ScriptLLM(script), aux_llm=Aux()), hanger, asked


def _late(problems, hook: str) -> list[str]:
    return [p.status for p in problems if p.hook == hook and p.plugin == "hanger"]


@pytest.mark.parametrize("hook", ["on_turn_begin", "tool_batch_note", "on_turn_end"])
def test_a_hung_turn_hook_costs_one_deadline_and_the_review_still_works(home, hook):
    script = [tool_reply(("note", {"text": "a"})), reply("one"),
              tool_reply(("note", {"text": "b"})), reply("two")]
    agent, hanger, asked = _hung(home, hook, script)
    try:
        started = time.perf_counter()
        first = agent.run_turn("hello")
        first_seconds = time.perf_counter() - started
        assert hanger.entered.is_set()
        assert first_seconds < DEADLINE + SLACK  # about the deadline, not the hang
        assert _late(first.problems, hook) == ["timed_out"]
        problem = next(p for p in first.problems if p.hook == hook)
        assert "hanger" in problem.message and hook in problem.message
        # memory_review, beside it, still counts, nudges and reviews
        assert first.reply == "one" and first.review_started
        assert agent.curator.wait(10) and agent.curator.reports[-1].calls == 1

        started = time.perf_counter()
        second = agent.run_turn("again")
        second_seconds = time.perf_counter() - started
        # still hung: the plugin is not waited for again (its call queues behind the late one)
        assert not hanger.finished.is_set()
        assert second_seconds < DEADLINE
        assert _late(second.problems, hook) == ["queued"]
        assert second.reply == "two" and second.review_started
        assert agent.curator.wait(10) and len(asked) == 2
    finally:
        hanger.release.set()
    assert hanger.finished.wait(10)
    agent.close()
    # the late answers were dropped: no note, no notice, nothing merged afterwards
    assert "a late notice" not in first.notices + second.notices
    assert not [m for m in agent.history if "[hanger: a late note]" in m.content]


def test_a_hung_flush_does_not_hold_the_compaction(home):
    agent, hanger, _asked = _hung(home, "pre_compaction_flush", [reply("one"), reply("two")])
    try:
        agent.run_turn("hello")
        agent.run_turn("again")
        started = time.perf_counter()
        record = agent.compact()
        assert time.perf_counter() - started < DEADLINE + SLACK
        assert record is not None
        assert record.flush is None or record.flush.writes != ["late"]
        assert _late(agent.host.hooks.problems, "pre_compaction_flush") == ["timed_out"]
    finally:
        hanger.release.set()
    assert hanger.finished.wait(10)
    agent.close()


@pytest.mark.parametrize("hook", ["on_agent_reset", "on_agent_close"])
def test_a_hung_reset_or_close_hook_costs_one_deadline(home, hook):
    agent, hanger, _asked = _hung(home, hook, [reply("one")])
    try:
        agent.run_turn("hello")
        started = time.perf_counter()
        if hook == "on_agent_reset":
            agent.new_session()
        agent.close()
        # one deadline, then close's usual bound for late calls still on their lanes
        assert time.perf_counter() - started < DEADLINE + DRAIN + SLACK
        assert hanger.entered.is_set()
        assert _late(agent.host.hooks.problems, hook) == ["timed_out"]
    finally:
        hanger.release.set()
    assert hanger.finished.wait(10)


# ------------------------------------------ memory_review's quick hooks run on the turn's thread


def test_memory_reviews_quick_hooks_run_on_the_agents_thread_its_flush_on_its_lane(
        home, monkeypatch):
    """The built-in's bookkeeping (count, nudge, queue a due review, reset) costs a turn no lane
    hand-off (marked with loader.inline), and its close (bounded by itself) runs where the agent's
    close runs, as before it was a plugin; its flush, a model call, still runs on its lane under
    its deadline."""
    from hermes_core.plugins.memory_review.curator import Curator

    where: dict[str, str] = {}

    def spy(name):
        original = getattr(Curator, name)

        def record(self, *args, **kwargs):
            where.setdefault(name, threading.current_thread().name)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(Curator, name, record)

    for name in ("begin_turn", "skill_nudge", "end_turn", "reset", "flush", "close"):
        spy(name)
    agent, hanger, _asked = _hung(home, "none", [tool_reply(("note", {"text": "a"})), reply("one"),
                                                 reply("two")])
    here = threading.current_thread().name
    first = agent.run_turn("hello")
    assert first.review_started and agent.curator.wait(10)
    agent.run_turn("again")
    agent.compact()
    agent.new_session()
    agent.close()
    assert {where[n] for n in ("begin_turn", "skill_nudge", "end_turn", "reset", "close")} == {here}
    # its lane, or a runner holding its lane (beside hanger's)
    assert where["flush"] != here and where["flush"].startswith("hermes-lane-"), where["flush"]
    assert hanger.calls == 0


def test_only_the_built_in_module_itself_runs_inline():
    import types

    import hermes_core.plugins.memory_review as memory_review
    from hermes_core.loader import inline, runs_inline

    assert runs_inline("memory_review", memory_review, "on_turn_end")
    assert runs_inline("memory_review", memory_review, "on_turn_begin")
    assert runs_inline("memory_review", memory_review, "on_agent_close")  # bounded by itself
    # its flush makes a model call: on the lane, under its deadline
    assert not runs_inline("memory_review", memory_review, "pre_compaction_flush")
    # another object under its name, or another plugin: on its lane
    impostor = types.ModuleType("hermes_core.plugins.memory_review")
    impostor.on_turn_end = memory_review.on_turn_end  # type: ignore[attr-defined]
    assert not runs_inline("memory_review", impostor, "on_turn_end")
    assert not runs_inline("watcher", memory_review, "on_turn_end")
    # a third party marking its own implementation: ignored, it runs on its lane
    third = types.ModuleType("watcher")

    @inline
    def on_turn_end(agent, result):
        return None

    third.on_turn_end = on_turn_end  # type: ignore[attr-defined]
    assert not runs_inline("watcher", third, "on_turn_end")
    # a built-in module's unmarked implementation: on its lane
    import hermes_core.plugins.memory.file_memory as file_memory

    assert not any(runs_inline("file_memory", file_memory, h)
                   for h in ("on_turn_end", "sync_turn", "prefetch"))


def test_a_hung_turn_end_beside_another_plugins_still_costs_one_deadline(home):
    """Two third-party implementations go to one runner, memory_review's runs inline among
    them: the hung one costs the turn one deadline, the others' notes are merged."""
    watcher = Watcher()
    agent, hanger, asked = _hung(home, "on_turn_end", [reply("one"), reply("two")],
                                 extra=[("watcher", watcher)])
    try:
        started = time.perf_counter()
        first = agent.run_turn("hello")
        assert time.perf_counter() - started < DEADLINE + SLACK
        assert _late(first.problems, "on_turn_end") == ["timed_out"]
        assert "watcher saw 'one'" in first.notices and first.review_started
        started = time.perf_counter()
        second = agent.run_turn("again")
        assert time.perf_counter() - started < DEADLINE
        assert _late(second.problems, "on_turn_end") == ["queued"]
        assert "watcher saw 'two'" in second.notices and second.review_started
        assert agent.curator.wait(10) and len(asked) == 2
    finally:
        hanger.release.set()
    assert hanger.finished.wait(10)
    agent.close()
    assert "a late notice" not in first.notices + second.notices
