"""The background memory review, end to end.

Real parts: the file memory and the session archive (real files, a real state.db), the real
anthropic SDK through AnthropicLLM, a real HTTP server on 127.0.0.1. The only fake is the model's
words: the loopback Messages API answers from a function that tells turn requests from review
requests by the review's own prompt.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from hermes_core import MemoryProvider, PluginHost, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.plugins.memory.file_memory import FileMemory
from hermes_core.plugins.memory.session_archive import SessionArchiveProvider
from hermes_core.plugins.memory_review.curator import REVIEW_PROMPT, Curator
from hermes_core.testing import Failure, MessagesAPIServer, Reply
from hermes_core.toolrun import ToolOutcome
from hermes_core.types import ToolCall

MARK = REVIEW_PROMPT[:30]


def make_host(home, *, providers=(), memory: str = "", config_text: str = "") -> PluginHost:
    """A host whose only plugins are ``providers`` (all activated), with extra ``memory:`` keys."""
    names = ", ".join(cls.name for cls in providers)
    text = f"memory:\n  providers: [{names}]\n{memory}context:\n  engine: none\n{config_text}"

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register):
            for cls in providers:
                register(cls)

        @hookimpl
        def register_llm_clients(self, register):
            register(AnthropicLLM)  # the review's model: the real client, on the loopback API

    host = PluginHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                           builtins=False, entry_points=False, directories=False,
                           plugins=[("test_plugins", Registrar())])
    host.activate_memory_providers()
    return host
FACT = "Prefers metric units"


def _text(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [str(b.get("text") or b.get("content") or "") for b in content]
    return "\n".join(parts)


def _ends_with_tool_result(body: dict[str, Any]) -> bool:
    content = body["messages"][-1]["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _is_review(body: dict[str, Any]) -> bool:
    return MARK in _text(body)


def responder(review: Callable[[dict[str, Any]], Any] | None = None,
              turn: Callable[[dict[str, Any]], Any] | None = None) -> Callable[[dict[str, Any]], Any]:
    def answer(body: dict[str, Any]) -> Any:
        if _is_review(body):
            if review is not None:
                return review(body)
            if _ends_with_tool_result(body):
                return "Saved."
            return Reply(tool_calls=[{"name": "memory", "input": {
                "action": "add", "target": "user", "content": FACT}}])
        if turn is not None:
            return turn(body)
        return f"answer {sum(1 for m in body['messages'] if m['role'] == 'user')}"
    return answer


class Recording(MemoryProvider):
    """Keeps every text the kernel hands a provider."""

    name = "recording"

    def __init__(self, config, context):
        super().__init__(config, context)
        self.lock = threading.Lock()
        self.seen: list[str] = []
        self.writes: list[Any] = []

    def _add(self, text: str) -> None:
        with self.lock:
            self.seen.append(text)

    @hookimpl
    def on_message(self, message, session):
        self._add(f"on_message {message.content}")

    @hookimpl
    def prefetch(self, query, session):
        self._add(f"prefetch {query}")

    @hookimpl
    def queue_prefetch(self, query, session):
        self._add(f"queue_prefetch {query}")

    @hookimpl
    def sync_turn(self, user_message, assistant_message, session, messages):
        self._add("sync_turn " + " | ".join(m.content for m in messages))

    @hookimpl
    def on_pre_compress(self, messages, session):
        self._add("on_pre_compress " + " | ".join(m.content for m in messages))

    @hookimpl
    def on_memory_write(self, write):
        with self.lock:
            self.writes.append(write)


def _config(api: MessagesAPIServer, extra: str = "") -> str:
    return (f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  max_retries: 0\n"
            f"  auxiliary_model: claude-aux\n{extra}")


def _agent(home, api, *, memory: str = "", **kwargs: Any) -> tuple[Agent, Recording]:
    host = make_host(home, providers=[FileMemory, SessionArchiveProvider, Recording],
                     config_text=_config(api), memory=memory)
    recording = host.instances["memory-provider:recording"]
    return Agent(host, AnthropicLLM.from_config(host.config.core), **kwargs), recording


def test_twelve_turns_trigger_exactly_one_review_after_turn_ten(home):
    notices: list[str] = []
    with MessagesAPIServer(responder()) as api:
        agent, recording = _agent(home, api, on_notice=notices.append)
        started = []
        results = []
        for n in range(1, 13):
            result = agent.run_turn(f"question {n}")
            started.append(result.review_started)
            results.append(result)
            if n == 10:
                assert agent.curator.wait(10)
        agent.close()

        assert started == [False] * 9 + [True, False, False]
        reviews = [b for b in api.bodies if _is_review(b)]
        assert len(reviews) == 2  # the tool call, then the answer after its result
        assert len(api.bodies) == 12 + 2
        # the auxiliary model, only the memory tool, the session's own frozen system prompt
        assert {b["model"] for b in reviews} == {"claude-aux"}
        assert [t["name"] for t in reviews[0]["tools"]] == ["memory"]
        assert reviews[0]["system"] == api.bodies[9]["system"]
        # it read the conversation up to turn 10
        assert "question 10" in _text(reviews[0]) and "question 11" not in _text(reviews[0])

    # written through the shared store
    assert (home / "memories" / "USER.md").read_text(encoding="utf-8") == f"{FACT}\n"
    # shown to the user: as it happened, and on the next turn's result
    expected = f'memory updated: added to USER.md: "{FACT}"'
    assert notices == [expected]
    assert results[10].notices == [expected] and results[11].notices == []
    # mirrored to the other providers through on_memory_write, once
    assert [(w.action, w.target, w.content, w.origin) for w in recording.writes] == [
        ("add", "user", FACT, "memory_review")]  # labelled: other providers can tell it apart
    # no trace of the review in any provider's hooks or in state.db
    assert not [s for s in recording.seen if MARK in s or FACT in s]
    with sqlite3.connect(home / "state.db") as con:
        stored = [row[0] for row in con.execute("SELECT content FROM messages")]
    assert len(stored) == 24
    assert not [c for c in stored if MARK in c or FACT in c]


def test_the_review_and_the_agent_writing_one_fact_leave_one_entry(home):
    """The review is slow; meanwhile the main agent stores the same fact in the next turn. One
    store, one lock: the second add is recognised as a duplicate."""
    def review(body):
        if _ends_with_tool_result(body):
            return "Saved."
        return Reply(delay=0.4, tool_calls=[{"name": "memory", "input": {
            "action": "add", "target": "user", "content": FACT}}])

    def turn(body):
        if "store it" in _text(body) and not _ends_with_tool_result(body):
            return Reply(tool_calls=[{"name": "memory", "input": {
                "action": "add", "target": "user", "content": FACT}}])
        return "ok"

    with MessagesAPIServer(responder(review, turn)) as api:
        agent, recording = _agent(home, api, memory="  nudge_interval: 2\n  flush_min_turns: 0\n")
        agent.run_turn("I like metric units")
        assert agent.run_turn("and km, not miles").review_started
        assert agent.curator.busy  # the reply came back while the review was still running
        agent.run_turn("store it please")
        assert agent.curator.wait(10)
        agent.close()
    assert (home / "memories" / "USER.md").read_text(encoding="utf-8") == f"{FACT}\n"
    assert len(recording.writes) == 1  # the duplicate add was not mirrored again


def test_a_failing_review_model_writes_nothing_and_the_turn_goes_on(home):
    def review(body):
        return Failure(500, "the review model is down")

    with MessagesAPIServer(responder(review)) as api:
        agent, _recording = _agent(home, api, memory="  nudge_interval: 1\n  flush_min_turns: 0\n")
        first = agent.run_turn("hello")
        assert first.reply == "answer 1" and first.review_started
        assert agent.curator.wait(10)
        report = agent.curator.reports[-1]
        assert report.kind == "review" and report.calls == 0
        assert report.error is not None and "500" in report.error
        second = agent.run_turn("still there?")
        assert second.reply == "answer 2" and second.notices == []
        agent.close()
    assert not (home / "memories" / "USER.md").exists()
    assert not (home / "memories" / "MEMORY.md").exists()


def test_a_review_past_its_bound_writes_nothing(home):
    def review(body):
        return Reply(delay=3.0, tool_calls=[{"name": "memory", "input": {
            "action": "add", "target": "user", "content": FACT}}])

    with MessagesAPIServer(responder(review)) as api:
        agent, _recording = _agent(
            home, api, memory="  nudge_interval: 1\n  flush_min_turns: 0\n  review_timeout: 0.5\n")
        result = agent.run_turn("hello")
        assert result.reply == "answer 1" and agent.curator.busy
        assert agent.curator.wait(10)
        report = agent.curator.reports[-1]
        assert report.writes == [] and (report.error or report.timed_out)
        agent.close()
    assert not (home / "memories" / "USER.md").exists()


def test_close_cancels_a_review_that_outlives_its_bound(home):
    """The model answers, but after the bound: the answer's tool calls are never applied."""
    gate = threading.Event()

    class SlowLLM:
        def respond(self, **kwargs):
            gate.wait(5)
            from hermes_core.llm import LLMResponse
            return LLMResponse("", tool_calls=[ToolCall("c1", "memory", {
                "action": "add", "target": "user", "content": FACT})])

    with MessagesAPIServer(responder()) as api:
        agent, _recording = _agent(
            home, api, memory="  nudge_interval: 1\n  flush_min_turns: 0\n  review_timeout: 0.3\n",
            aux_llm=SlowLLM())
        agent.run_turn("hello")
        assert agent.curator.busy
        agent.close()  # waits up to the 0.3 s bound, then cancels
        gate.set()
        assert agent.curator.wait(5)
    assert agent.curator.reports[-1].timed_out
    assert not (home / "memories" / "USER.md").exists()


# ------------------------------------------------------------------------------- the counters


def _outcome(name: str) -> ToolOutcome:
    return ToolOutcome(ToolCall("c", name, {}), "p", "{}")


def _due_turns(curator: Curator, turns: int, memory_on: tuple[int, ...] = ()) -> list[int]:
    """The turns at which a review was due (the job factory was asked for a snapshot)."""
    asked: list[int] = []
    for n in range(1, turns + 1):
        curator.begin_turn()
        curator.end_turn([_outcome("memory")] if n in memory_on else [],
                         lambda n=n: asked.append(n),  # returns None: no review is started
                         memory_tools={"memory"})
    return asked


def test_the_nudge_interval_min_turns_and_memory_use(home):
    def curator(memory: str, prior: int = 0) -> Curator:
        host = make_host(home, memory=memory)
        return Curator(host, prior_user_turns=prior)

    assert _due_turns(curator("  nudge_interval: 3\n  flush_min_turns: 0\n"), 9) == [3, 6, 9]
    assert _due_turns(curator("  nudge_interval: 0\n"), 30) == []
    # never before flush_min_turns: due at 2 but waits for turn 5, then counts afresh
    assert _due_turns(curator("  nudge_interval: 2\n  flush_min_turns: 5\n"), 9) == [5, 7, 9]
    # the model saving memory itself restarts the count
    assert _due_turns(curator("  nudge_interval: 3\n  flush_min_turns: 0\n"), 9, (2,)) == [5, 8]
    # a resumed conversation of 7 turns keeps its place in the cycle (the next review at 10)
    assert _due_turns(curator("  flush_min_turns: 0\n", prior=7), 5) == [3]


def test_a_raising_notice_callback_is_logged_and_the_notice_kept(home, caplog):
    def broken(text: str) -> None:
        raise RuntimeError("the terminal is gone")

    curator = Curator(make_host(home), on_notice=broken)
    curator._notify("memory updated: x")
    assert curator.take_notices() == ["memory updated: x"] and curator.take_notices() == []
    assert "on_notice callback raised RuntimeError" in caplog.text


def test_with_per_user_memory_the_review_writes_to_the_users_memory(home):
    """memory.scope: user: alice's conversation is reviewed into alice's memory, never into the
    shared memory every user's prompt shows."""
    from hermes_core.types import Session

    with MessagesAPIServer(responder()) as api:
        host = make_host(home, providers=[FileMemory, SessionArchiveProvider],
                         config_text=_config(api),
                         memory="  scope: user\n  nudge_interval: 2\n  flush_min_turns: 0\n")
        provider = host.instances["memory-provider:file_memory"]
        agent = Agent(host, AnthropicLLM.from_config(host.config.core),
                      session=Session(id="alice-1", attributes={"user_id": "alice"}))
        agent.run_turn("I like metric units")
        assert agent.run_turn("and km, not miles").review_started
        assert agent.curator.wait(10)
        alice, shared = provider.user_store("alice"), provider.store
        assert shared.entries("user") == []  # the shared memory every user's prompt shows
        assert alice.entries("user") == [FACT]
        agent.close()
