"""The hooks around every tool call: ``on_pre_tool_call`` (may block) and ``on_post_tool_call``."""

from __future__ import annotations

import threading

from agent_support import ScriptLLM, make_host, reply, tool_reply

from hermes_core import Tool, hookimpl
from hermes_core.agent import Agent
from hermes_core.toolrun import ToolRouter
from hermes_core.types import Session, ToolCall

SESSION = Session(id="s1")
OBJ = {"type": "object", "properties": {"path": {"type": "string"}}}


def make_tools(ran: list[str]) -> list[Tool]:
    def handler(name: str):
        def run(args, ctx):
            ran.append(name)
            if name == "explode":
                raise RuntimeError("the disk is on fire")
            return f"{name} done"
        return run

    return [Tool(name=n, description=f"the {n} tool", parameters=OBJ, handler=handler(n))
            for n in ("read", "delete", "explode")]


class Guard:
    """Blocks ``delete``; records every call it sees."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str]] = []

    @hookimpl
    def on_pre_tool_call(self, call, session, plugin):
        self.seen.append((call.name, session.id if session else None, plugin))
        return "deleting is not allowed here" if call.name == "delete" else None


class Watcher:
    def __init__(self) -> None:
        self.outcomes: list = []

    @hookimpl
    def on_post_tool_call(self, call, session, outcome):
        self.outcomes.append(outcome)


class Broken:
    """Raises in both hooks and answers a wrong type: logged, never the call's failure."""

    @hookimpl
    def on_pre_tool_call(self, call):
        raise ValueError("the guard is broken")

    @hookimpl
    def on_post_tool_call(self, outcome):
        raise ValueError("the watcher is broken")


class WrongType:
    @hookimpl
    def on_pre_tool_call(self, call):
        return {"action": "block"}  # not text: ignored


class Hung:
    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def on_pre_tool_call(self, call):
        self.release.wait(30)
        return "too late to block"


def test_hook_on_pre_tool_call(home):
    ran: list[str] = []
    guard, hung = Guard(), Hung()
    host = make_host(home, tools=make_tools(ran),
                     config_text="hooks:\n  timeouts:\n    on_pre_tool_call: 0.3\n",
                     extra_plugins=[("broken", Broken()), ("wrong", WrongType()),
                                    ("guard", guard), ("hung", hung)])
    try:
        router = ToolRouter.from_host(host)
        read, delete = router.run([ToolCall("c1", "read", {"path": "a"}),
                                   ToolCall("c2", "delete", {"path": "b"})], SESSION)
        # the read ran although a guard raised, one answered a dict and one hung past its deadline
        assert (read.content, read.is_error, read.blocked_by) == ("read done", False, None)
        # the delete did not run: the model reads who blocked it and why
        assert ran == ["read"]
        assert delete.is_error and delete.blocked_by == "guard"
        assert delete.content == ("Error: the plugin 'guard' blocked this call of 'delete': "
                                  "deleting is not allowed here")
        assert guard.seen == [("read", "s1", "test_plugins"), ("delete", "s1", "test_plugins")]
        problems = {(p.plugin, p.status) for p in host.hooks.problems if p.hook == "on_pre_tool_call"}
        assert {("broken", "error"), ("wrong", "bad_return"), ("hung", "timed_out")} <= problems
        # an unknown tool is answered without asking the guards
        assert router.run_one(ToolCall("c3", "nope", {}), SESSION).plugin is None
        assert len(guard.seen) == 2
    finally:
        hung.release.set()
        host.shutdown()


def test_hook_on_post_tool_call(home):
    ran: list[str] = []
    watcher = Watcher()
    host = make_host(home, tools=make_tools(ran),
                     extra_plugins=[("broken", Broken()), ("guard", Guard()), ("watcher", watcher)])
    try:
        router = ToolRouter.from_host(host)
        outcomes = [router.run_one(ToolCall(f"c{i}", n, {}), SESSION)
                    for i, n in enumerate(("read", "explode", "delete"))]
        assert [o.call.name for o in watcher.outcomes] == ["read", "explode", "delete"]
        assert watcher.outcomes == outcomes  # what the model reads, as the watcher saw it
        read, exploded, deleted = watcher.outcomes
        assert not read.is_error and read.content == "read done"
        assert exploded.is_error and "the disk is on fire" in exploded.content
        assert deleted.blocked_by == "guard" and ran == ["read", "explode"]
        assert any(p.hook == "on_post_tool_call" and p.plugin == "broken"
                   for p in host.hooks.problems)
    finally:
        host.shutdown()


def test_a_block_reaches_the_model_in_a_turn(home):
    ran: list[str] = []
    guard = Guard()
    host = make_host(home, tools=make_tools(ran), extra_plugins=[("guard", guard)])
    llm = ScriptLLM([tool_reply(("delete", {"path": "notes.txt"})), reply("I could not delete it.")])
    agent = Agent(host, llm)
    try:
        result = agent.run_turn("delete notes.txt")
        assert result.reply == "I could not delete it."
        assert ran == []
        tool_results = [m for m in llm.calls[-1]["messages"] if m.role == "tool"]
        assert "deleting is not allowed here" in tool_results[-1].content
        assert guard.seen[0][:2] == ("delete", agent.session.id)
    finally:
        agent.close()
