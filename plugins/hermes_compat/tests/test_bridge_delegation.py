"""Delegation as a Hermes plugin sees it, driven through a real ``delegate_task``.

The plugin below is written in Hermes 0.19.0's form (a ``register(ctx)`` registering a
``MemoryProvider`` subclass and the general hooks ``subagent_start`` / ``subagent_stop``) and
dropped into the home's ``hermes-plugins/`` folder. Each call it gets is logged, with the session
its object was initialised for, into its Hermes home. The agent runs on the real anthropic SDK
against the loopback Messages API server with the real session archive: the only fake part is
the model's words (the server's responder answers the parent, or a child by its task).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hermes_core_hermes_compat.plugin as bridge
from conftest import drop_folder_plugin

from hermes_core.agent import Agent
from hermes_core.testing import Failure, MessagesAPIServer, Reply, make_host

DELEG = '''
import json
from pathlib import Path
from agent.memory_provider import MemoryProvider
from hermes_constants import get_hermes_home


def _log(event, **fields):
    with open(get_hermes_home() / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, **fields}, default=str) + "\\n")


class Deleg(MemoryProvider):
    name = "deleg"

    def __init__(self):
        self.session = None
        self.context = None

    def is_available(self):
        return True

    def initialize(self, session_id, **kwargs):
        self.session, self.context = session_id, kwargs.get("agent_context")
        _log("initialize", session_id=session_id, agent_context=self.context,
             parent_session_id=kwargs.get("parent_session_id"))

    def prefetch(self, query, *, session_id=""):
        return f"DELEG-RECALL for a {self.context} agent"

    def sync_turn(self, user_content, assistant_content, *, session_id=""):
        _log("sync_turn", obj=self.session, user=user_content)

    def on_session_end(self, messages):
        _log("on_session_end", obj=self.session)

    def on_delegation(self, task, result, *, child_session_id="", **kwargs):
        _log("on_delegation", obj=self.session, task=task, result=result,
             child_session_id=child_session_id, extra=sorted(kwargs))

    def get_tool_schemas(self):
        return [{"name": "deleg_whoami", "description": "Who answers this call.",
                 "parameters": {"type": "object", "properties": {}}}]

    def handle_tool_call(self, name, args, **kwargs):
        return json.dumps({"session": self.session, "agent_context": self.context})

    def shutdown(self):
        _log("shutdown", obj=self.session)


def on_subagent_start(**kwargs):
    _log("subagent_start", **kwargs)


def on_subagent_stop(**kwargs):
    _log("subagent_stop", **kwargs)


def register(ctx):
    ctx.register_memory_provider(Deleg())
    ctx.register_hook("subagent_start", on_subagent_start)
    ctx.register_hook("subagent_stop", on_subagent_stop)
'''


def calls(core_home: Path) -> list[dict[str, Any]]:
    [log] = list((core_home / "hermes-compat").rglob("calls.jsonl"))
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def who_asks(body: dict[str, Any]) -> str:
    """"parent", or the child's task (the first line of its first user message)."""
    if "You are a subagent" not in json.dumps(body.get("system")):
        return "parent"
    first = body["messages"][0]["content"]
    return (first if isinstance(first, str) else first[0]["text"]).split("\n")[0]


def answered(body: dict[str, Any]) -> list[str]:
    """The tool results in a request, as text."""
    return [inner if isinstance(inner, str) else "".join(b.get("text", "") for b in inner)
            for message in body["messages"] if isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "tool_result"
            for inner in [block.get("content") or ""]]


def test_delegation_reaches_a_hermes_plugin_as_hermes_tells_it(core_home: Path) -> None:
    drop_folder_plugin(core_home, "deleg", DELEG)

    def respond(body: dict[str, Any]) -> Reply | Failure | str:
        who = who_asks(body)
        if who == "parent":
            if "Next question" in json.dumps(body["messages"]):
                return "Noted."
            if answered(body):
                return "Peru's capital is Lima; the other task failed."
            return Reply(tool_calls=[{"name": "delegate_task", "input": {"tasks": [
                {"task": "Find the capital of Peru"}, {"task": "Crash on purpose"}]}}])
        if who == "Crash on purpose":
            return Failure(500, "boom")
        if not answered(body):
            return Reply(tool_calls=[{"name": "deleg_whoami", "input": {}}])
        return "The capital of Peru is Lima."

    with MessagesAPIServer(respond) as api:
        host = make_host(core_home, plugins=[("hermes_compat", bridge)], config=(
            "memory:\n  providers: [session_archive, hermes-deleg]\n"
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n"))
        agent = Agent.create(host)  # the client llm.* selects (the kernel builds it)
        try:
            first = agent.run_turn("Two jobs, please.")
            second = agent.run_turn("Next question.")
        finally:
            agent.close()
        bodies = api.bodies
    assert first.reply == "Peru's capital is Lima; the other task failed."
    assert second.reply == "Noted."
    parent = agent.session.id
    log = calls(core_home)
    inits = [e for e in log if e["event"] == "initialize"]
    # the parent's object once, for its session (a child never moved it); one object per child,
    # initialised as Hermes documents a subagent's provider
    assert [e for e in inits if e["agent_context"] == "primary"] == [
        {"event": "initialize", "session_id": parent, "agent_context": "primary",
         "parent_session_id": None}]
    children = [e for e in inits if e["agent_context"] == "subagent"]
    assert len(children) == 2 and all(e["parent_session_id"] == parent for e in children)
    child_ids = {e["session_id"] for e in children}
    [peru] = [e for e in log if e["event"] == "subagent_start"
              and e["child_goal"] == "Find the capital of Peru"]
    peru_id = peru["child_session_id"]
    assert peru_id in child_ids

    # the child recalled and used the provider's tool through its own object
    child_bodies = [b for b in bodies if who_asks(b) == "Find the capital of Peru"]
    assert "DELEG-RECALL for a subagent agent" in json.dumps(child_bodies[0]["messages"])
    assert any(json.dumps({"session": peru_id, "agent_context": "subagent"}) in r
               for r in answered(child_bodies[-1]))
    assert "DELEG-RECALL for a primary agent" in json.dumps(bodies[0]["messages"])

    # nothing of the children was written as the user's: sync_turn and on_session_end only on
    # the parent's object; each child's object was shut down when the child ended
    assert [(e["obj"], e["user"]) for e in log if e["event"] == "sync_turn"] == [
        (parent, "Two jobs, please."), (parent, "Next question.")]
    assert [e["obj"] for e in log if e["event"] == "on_session_end"] == [parent]
    assert sorted(e["obj"] for e in log if e["event"] == "shutdown") == sorted(
        [*child_ids, parent])

    # on_delegation on the parent's object, once per child, with Hermes' arguments; a child
    # without an answer reports "" (Hermes passes the child's summary, which it has none of)
    delegations = {e["task"]: e for e in log if e["event"] == "on_delegation"}
    assert set(delegations) == {"Find the capital of Peru", "Crash on purpose"}
    assert all(e["obj"] == parent and e["extra"] == [] for e in delegations.values())
    assert delegations["Find the capital of Peru"]["result"] == "The capital of Peru is Lima."
    assert delegations["Find the capital of Peru"]["child_session_id"] == peru_id
    assert delegations["Crash on purpose"]["result"] == ""

    # the general hooks with Hermes' keyword arguments
    for start in (e for e in log if e["event"] == "subagent_start"):
        assert start["parent_session_id"] == parent and start["parent_subagent_id"] is None
        assert start["child_subagent_id"] == start["child_session_id"]
        assert start["child_role"] == "leaf" and start["telemetry_schema_version"] == 1
        assert start["parent_turn_id"] == f"{parent}:1"
    stops = {e["child_session_id"]: e for e in log if e["event"] == "subagent_stop"}
    assert set(stops) == child_ids
    done = stops[peru_id]
    assert done["child_status"] == "completed"
    assert done["child_summary"] == "The capital of Peru is Lima."
    assert done["parent_session_id"] == parent and done["child_role"] == "leaf"
    assert isinstance(done["duration_ms"], int) and done["duration_ms"] >= 0
    [crashed] = [e for sid, e in stops.items() if sid != peru_id]
    assert crashed["child_status"] == "error" and crashed["child_summary"] is None
    # Hermes' order: on_delegation of a child, then its subagent_stop
    events = [e["event"] for e in log]
    assert events.index("on_delegation") < events.index("subagent_stop")


def test_subagent_hooks_are_no_longer_listed_as_unmapped() -> None:
    from hermes_core_hermes_compat.general import DELIVERED, UNMAPPED, Registered, unmapped_hooks

    assert {"subagent_start", "subagent_stop"} <= set(DELIVERED)
    assert not {"subagent_start", "subagent_stop"} & set(UNMAPPED)
    registered = Registered(hooks={"subagent_stop": [print], "pre_verify": [print]})
    assert unmapped_hooks(registered) == ["pre_verify (hermes-core has no verification loop)"]
