"""delegate_task end to end: child agents through the real anthropic SDK against the loopback
Messages API (hermes_core.testing.MessagesAPIServer, a real HTTP server on 127.0.0.1), the real
session archive in a real SQLite file, and a throwaway recording provider. The only fake is the
model's words: the server's responder answers each request by who is asking (the parent, or a
child recognised by its task)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from agent_support import CallLog

from hermes_core import ContextEngine, MemoryProvider, PluginHost, Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.config import parse_config_text
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.plugins.memory import session_archive
from hermes_core.plugins.tools import delegate
from hermes_core.testing import Failure, MessagesAPIServer, Reply

ENGINES: list[int] = []


class Recording(MemoryProvider):
    """Records what the kernel tells a provider, with the session's agent_context."""

    name = "recording"
    log: CallLog

    @hookimpl
    def on_message(self, message, session):
        self.log.add(f"on_message {session.agent_context} {message.role}")

    @hookimpl
    def sync_turn(self, user_message, assistant_message, session, messages):
        self.log.add(f"sync_turn {session.id} {session.agent_context} {user_message.content}")

    @hookimpl
    def on_delegation(self, task, result, child_session_id, status, session):
        self.log.add(f"on_delegation {session.id} {child_session_id} {status} {task} => {result}")


class Counting(ContextEngine):
    name = "counting"

    @hookimpl
    def update_from_response(self, usage):
        ENGINES.append(id(self))


def lookup_tool() -> Tool:
    return Tool(name="lookup", description="Look a word up.", parallel_safe=True,
                parameters={"type": "object", "properties": {"q": {"type": "string"}}},
                handler=lambda args, ctx: f"definition of {args.get('q')}")


def build(home, log: CallLog, config: str = "") -> PluginHost:
    Recording.log = log

    class Registrar:
        @hookimpl
        def register_memory_providers(self, register: Callable[[type], None]) -> None:
            register(Recording)

        @hookimpl
        def register_context_engines(self, register: Callable[[type], None]) -> None:
            register(Counting)

        @hookimpl
        def register_tools(self, register: Callable[[Tool], None]) -> None:
            register(lookup_tool())

    text = ("memory:\n  providers: [session_archive, recording]\ncontext:\n  engine: counting\n"
            + config)
    host = PluginHost.load(home, config=parse_config_text(text, home / "config.yaml"),
                           builtins=False, entry_points=False, directories=False,
                           plugins=[("session_archive", session_archive), ("delegate", delegate),
                                    ("test_plugins", Registrar())])
    host.activate_memory_providers()
    host.activate("context-engine", "counting", config_key="context.engine")
    return host


def asker(body: dict[str, Any]) -> str:
    """Who sent a request: "parent", or the child's task (its first user message)."""
    if "You are a subagent" not in json.dumps(body.get("system")):
        return "parent"
    content = body["messages"][0]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    return text.split("\n")[0]


def tool_results(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    inner = block["content"]
                    out.append(inner if isinstance(inner, str) else
                               "".join(b.get("text", "") for b in inner))
    return out


def delegating(*tasks: str) -> Reply:
    return Reply(tool_calls=[{"name": "delegate_task",
                              "input": {"tasks": [{"task": t} for t in tasks]}}])


def llm_for(api: MessagesAPIServer) -> AnthropicLLM:
    return AnthropicLLM(api_key="test-key", base_url=api.base_url, model="claude-test",
                        max_retries=0)


def test_two_delegated_tasks_archived_searchable_and_kept_out_of_memory_writes(home):
    log = CallLog()
    ENGINES.clear()

    def respond(body: dict[str, Any]) -> Reply | str:
        who = asker(body)
        if who == "parent":
            if not tool_results(body):
                return delegating("Find the capital of Peru", "Define the word quokka")
            return "Lima, and a quokka is a small wallaby."
        if who == "Define the word quokka" and not tool_results(body):
            return Reply(tool_calls=[{"name": "lookup", "input": {"q": "quokka"}}])
        return {"Find the capital of Peru": "The capital of Peru is Lima.",
                "Define the word quokka": "A quokka is a small wallaby (zanzibarite)."}[who]

    host = build(home, log)
    with MessagesAPIServer(respond) as api:
        agent = Agent(host, llm_for(api))
        result = agent.run_turn("Two questions, please.")
        # the children's tools: the parent's minus delegate_task (max_depth 1)
        child_tools = [{t["name"] for t in b.get("tools", [])} for b in api.bodies
                       if asker(b) != "parent"]
        agent.close()
    assert result.reply == "Lima, and a quokka is a small wallaby."
    [outcome] = result.tools
    assert not outcome.is_error
    assert "The capital of Peru is Lima." in outcome.content
    assert "(zanzibarite)" in outcome.content
    assert child_tools and all("delegate_task" not in t and "lookup" in t for t in child_tools)

    archive = session_archive.open_archive(session_archive.SessionArchiveConfig(), home)
    shown = archive.show(agent.session.id)
    children = shown["delegations"]
    assert len(children) == 2
    for child in children:
        record = archive.get_session(child["id"])
        assert record.parent_session_id == agent.session.id and record.origin == "delegation"
        assert record.end_reason == "delegated"
    hits = session_archive.search_messages(archive, "zanzibarite")
    assert {h.session_id for h in hits.hits} & {c["id"] for c in children}
    # resuming "the latest session" finds the parent, not a child
    assert archive.resumable("cli")[0].id == agent.session.id

    # memory writes: only the parent's turn; the children's messages were archived as subagent
    syncs = [e for e in log.names() if e.startswith("sync_turn")]
    assert syncs == [f"sync_turn {agent.session.id} primary Two questions, please."]
    assert "on_message subagent assistant" in log.names()
    delegations = [e for e in log.names() if e.startswith("on_delegation")]
    assert len(delegations) == 2
    assert any("completed Find the capital of Peru => The capital of Peru is Lima." in e
               for e in delegations)
    assert {e.split()[2] for e in delegations} == {c["id"] for c in children}
    # each child had a context engine instance of its own
    assert len(set(ENGINES)) == 3


def test_hook_on_delegation(home):
    log = CallLog()

    def respond(body):
        if asker(body) == "parent":
            return "done" if tool_results(body) else delegating("Say hi")
        return "hi"

    host = build(home, log)
    with MessagesAPIServer(respond) as api:
        agent = Agent(host, llm_for(api))
        agent.run_turn("go")
        agent.close()
    [event] = [e for e in log.names() if e.startswith("on_delegation")]
    assert event.startswith(f"on_delegation {agent.session.id} ")
    assert event.endswith("completed Say hi => hi")


def test_children_share_the_budget_and_the_parent_is_told_to_respond_now(home):
    log = CallLog()

    def respond(body):
        if asker(body) == "parent":
            return "Answer with what I have." if tool_results(body) else delegating("Dig forever")
        return Reply(tool_calls=[{"name": "lookup", "input": {"q": "more"}}])

    host = build(home, log, "llm:\n  max_iterations: 10\n")
    with MessagesAPIServer(respond) as api:
        agent = Agent(host, llm_for(api))
        result = agent.run_turn("research this")
        bodies = api.bodies
        agent.close()
    assert result.reply == "Answer with what I have." and not result.budget_exhausted
    assert len(bodies) == 10  # 1 parent call, 8 by the child, the parent's answer
    assert result.iterations == 10
    delegated = tool_results(bodies[-1])[-1]
    assert "budget_exhausted" in delegated and "shared budget" in delegated
    assert "Respond now" in delegated
    # the child saw the notes too, in its own tool results
    child_last = [b for b in bodies if asker(b) != "parent"][-1]
    assert any("Respond now" in r or "Wrap up" in r for r in tool_results(child_last))


def test_a_child_that_raises_hangs_or_runs_out_of_budget_is_an_error_and_the_turn_goes_on(home):
    log = CallLog()
    release = threading.Event()

    def respond(body):
        who = asker(body)
        if who == "parent":
            if tool_results(body):
                return "Carrying on without them."
            return delegating("Crash", "Hang", "Loop")
        if who == "Crash":
            return Failure(500, "boom")
        if who == "Hang":
            release.wait(30)  # until the test ends (the server cuts it short then)
            return "too late"
        return Reply(tool_calls=[{"name": "lookup", "input": {"q": "again"}}])

    host = build(home, log, "delegation:\n  timeout: 1.0\n  child_max_iterations: 2\n")
    with MessagesAPIServer(respond) as api:
        agent = Agent(host, llm_for(api))
        result = agent.run_turn("three jobs")
        release.set()
        agent.close()
    assert result.reply == "Carrying on without them."
    [outcome] = result.tools
    assert outcome.is_error
    text = outcome.content
    assert "Task 1 (failed" in text and "LLMError" in text
    assert "Task 2 (timed_out" in text and "within 1 s (delegation.timeout)" in text
    assert "Task 3 (budget_exhausted" in text and "its 2 model calls" in text
    statuses = sorted(e.split()[3] for e in log.names() if e.startswith("on_delegation"))
    assert statuses == ["budget_exhausted", "failed", "timed_out"]


def test_disabled_delegation_leaves_the_tool_out(home):
    log = CallLog()
    host = build(home, log, "delegation:\n  enabled: false\n")
    with MessagesAPIServer(["hello"]) as api:
        agent = Agent(host, llm_for(api))
        agent.run_turn("hi")
        tools = {t["name"] for t in api.bodies[0]["tools"]}
        agent.close()
    assert "delegate_task" not in tools and "lookup" in tools
    assert "delegate_task" in host.tools()  # registered, but left out of the session's list


def test_fifty_tasks_run_the_bound_and_the_rest_are_refused(home):
    log = CallLog()
    tasks = [f"Job {i}" for i in range(1, 51)]
    running = {"now": 0, "most": 0}
    lock = threading.Lock()

    def respond(body):
        who = asker(body)
        if who == "parent":
            return "ok" if tool_results(body) else delegating(*tasks)
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        time.sleep(0.05)  # overlap the children's calls (not a wait on the test's state)
        with lock:
            running["now"] -= 1
        return f"{who} done"

    host = build(home, log, "delegation:\n  max_parallel: 4\n")
    with MessagesAPIServer(respond) as api:
        agent = Agent(host, llm_for(api))
        result = agent.run_turn("do all fifty")
        agent.close()
    [outcome] = result.tools
    assert not outcome.is_error
    assert [f"Job {i} done" in outcome.content for i in (1, 4, 5)] == [True, True, False]
    assert "Not run: tasks 5-50 (46 of 50): at most 4 child agents" in outcome.content
    assert running["most"] <= 4
    assert len([e for e in log.names() if e.startswith("on_delegation")]) == 4


def test_cancelling_the_parent_turn_cancels_its_children(home):
    log = CallLog()
    child_asked = threading.Event()
    release = threading.Event()

    def respond(body):
        if asker(body) == "parent":
            return delegating("Slow job")
        child_asked.set()
        release.wait(30)
        return "late"

    host = build(home, log)
    with MessagesAPIServer(respond) as api:
        agent = Agent(host, llm_for(api))
        box: list[Any] = []
        thread = threading.Thread(target=lambda: box.append(agent.run_turn("go")))
        thread.start()
        assert child_asked.wait(10)
        assert agent.cancel("the user pressed stop")
        thread.join(10)
        release.set()
        agent.close()
    [result] = box
    assert result.cancelled and "the user pressed stop" in result.reply
    assert "cancelled" in result.tools[0].content and result.tools[0].is_error
