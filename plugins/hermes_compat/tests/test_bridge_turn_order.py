"""When a turn's end reaches a Hermes general plugin: before the turn returns, as in Hermes.

Hermes fires ``post_llm_call`` and the per-turn ``on_session_end`` on the turn's own thread at
the end of ``run_conversation``, so a plugin sees each turn's end before anything of the next
turn (its ``pre_llm_call``, its tool calls), while the provider's own ``sync_turn`` runs on
Hermes' background memory worker. The plugins here log every call into them; only the model's
words are scripted.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import bridge_agent, bridge_host, drop_folder_plugin

from hermes_core.agent import Agent
from hermes_core.llm import LLMError, LLMFailure
from hermes_core.types import Message, Session, SwitchReason

#: a plugin with a slow store (its sync_turn takes half a second: a remote backend) and the
#: three turn hooks, each logging what it was told and on which thread
ORDER = '''
import json, threading, time
from agent.memory_provider import MemoryProvider
from hermes_constants import get_hermes_home


def _log(event, **fields):
    home = get_hermes_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, "thread": threading.get_ident(), **fields}) + "\\n")


class SlowStore(MemoryProvider):
    name = "order"

    def is_available(self):
        return True

    def initialize(self, session_id, **kw):
        pass

    def get_tool_schemas(self):
        return []

    def sync_turn(self, user_content, assistant_content, **kw):
        time.sleep(0.5)
        _log("sync_turn", user_message=user_content)


def pre_llm_call(user_message, turn_id, conversation_history, **kw):
    _log("pre_llm_call", user_message=user_message, turn_id=turn_id,
         history=[m["content"] for m in conversation_history])


def post_llm_call(user_message, turn_id, conversation_history, **kw):
    _log("post_llm_call", user_message=user_message, turn_id=turn_id,
         history=[m["content"] for m in conversation_history])


def on_session_end(turn_id, completed, interrupted, **kw):
    _log("on_session_end", turn_id=turn_id, completed=completed, interrupted=interrupted)


def register(ctx):
    ctx.register_memory_provider(SlowStore())
    for hook in ("pre_llm_call", "post_llm_call", "on_session_end"):
        ctx.register_hook(hook, globals()[hook])
'''

#: the prefetch deadline covers the slow store (the next turn's pre_llm_call waits behind it on
#: the plugin's thread), so every pre_llm_call answers its own turn
CONFIG = ("memory:\n  providers: [hermes-order]\n  prefetch_timeout: 10\n"
          "hooks:\n  timeouts:\n    on_message: 10\n    sync_turn: 10\n")


def _calls(core_home: Path) -> list[dict[str, Any]]:
    path = core_home / "hermes-compat" / "order" / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _turn_events(calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(event, which turn) of the turn hooks, in the order the plugin saw them."""
    turns = {c["turn_id"]: c["user_message"] for c in calls if c["event"] == "pre_llm_call"}
    return [(c["event"], turns.get(c["turn_id"], c["turn_id"])) for c in calls
            if c["event"] in ("pre_llm_call", "post_llm_call", "on_session_end")]


def test_a_turn_has_ended_for_the_plugin_when_it_returns(core_home: Path) -> None:
    """Back-to-back turns while the plugin's store is slow: each turn's post_llm_call and
    on_session_end have run when run_turn returns, before the next turn's pre_llm_call, on the
    thread its pre_llm_call ran on; the store's sync_turn still runs in the background."""
    drop_folder_plugin(core_home, "order", ORDER)
    agent = bridge_agent(core_home, CONFIG)
    try:
        for text in ("one", "two", "three"):
            agent.run_turn(text)
            ended = [e for e in _turn_events(_calls(core_home)) if e[1] == text]
            assert ended == [("pre_llm_call", text), ("post_llm_call", text),
                             ("on_session_end", text)], _calls(core_home)
        assert agent.worker.flush(20)
    finally:
        agent.close()
    calls = _calls(core_home)
    assert _turn_events(calls) == [(event, text) for text in ("one", "two", "three")
                                   for event in ("pre_llm_call", "post_llm_call",
                                                 "on_session_end")]
    assert [c["user_message"] for c in calls if c["event"] == "sync_turn"] == ["one", "two",
                                                                                "three"]
    # one thread per plugin object, as Hermes calls a turn's hooks from one thread
    assert len({c["thread"] for c in calls}) == 1
    ends = [c for c in calls if c["event"] == "on_session_end"]
    assert [(c["completed"], c["interrupted"]) for c in ends] == [(True, False)] * 3
    post = [c for c in calls if c["event"] == "post_llm_call"]
    assert post[-1]["history"] == ["one", "ok", "two", "ok", "three", "ok"]


class FailsOnce:
    """The model's words ("ok"); the call for the message "boom" fails (after the client's own
    retries), as a provider outage does."""

    def respond(self, **kw: Any) -> Any:
        from hermes_core.llm import LLMResponse
        from hermes_core.types import Usage

        if kw["messages"][-1].content.endswith("boom"):
            raise LLMError("the model endpoint is down", failure=LLMFailure.SERVER_ERROR,
                           status=503)
        return LLMResponse(text="ok", usage=Usage(input_tokens=10, output_tokens=2))

    def complete(self, **kw: Any) -> str:
        return "ok"


def test_a_turn_whose_model_call_fails_gets_no_end(core_home: Path) -> None:
    """Hermes 0.19.0 returns from run_conversation at once when the model call fails after its
    retries (no finalize_turn): no post_llm_call, no per-turn on_session_end, nothing stored.
    The turns around it end as usual, each naming its own turn."""
    drop_folder_plugin(core_home, "order", ORDER)
    agent = bridge_agent(core_home, CONFIG, FailsOnce())
    try:
        agent.run_turn("before")
        try:
            agent.run_turn("boom")
        except LLMError:
            pass
        else:
            raise AssertionError("the model call was meant to fail")
        agent.run_turn("after")
        assert agent.worker.flush(20)
    finally:
        agent.close()
    calls = _calls(core_home)
    assert _turn_events(calls) == [
        ("pre_llm_call", "before"), ("post_llm_call", "before"), ("on_session_end", "before"),
        ("pre_llm_call", "boom"),
        ("pre_llm_call", "after"), ("post_llm_call", "after"), ("on_session_end", "after")]
    assert [c["user_message"] for c in calls if c["event"] == "sync_turn"] == ["before", "after"]


def test_a_resumed_session_s_hooks_see_its_older_messages(core_home: Path) -> None:
    """After a resume, Hermes' hooks get the whole conversation (Hermes loads it from its
    store). The bridge learns the older messages when the resumed session's first turn reaches
    the plugin's sync_turn (the kernel gives it the stored history); from then on pre_llm_call
    and post_llm_call carry them, and the ends come before the turn returns."""
    drop_folder_plugin(core_home, "order", ORDER)
    older = [Message("user", "long ago"), Message("assistant", "noted")]
    first = bridge_agent(core_home, CONFIG)
    host = first.host
    try:
        session = Session("resumed", model=first.session.model)
        agent = Agent.create(host, first.llm, aux_llm=first.llm, session=session,
                             history=list(older))
        agent.run_turn("again")
        assert agent.worker.flush(20)  # its first turn has reached the plugin's sync_turn
        agent.run_turn("and again")
        assert agent.worker.flush(20)
        agent.close()
    finally:
        first.close()
    calls = [c for c in _calls(core_home) if c["event"] in ("pre_llm_call", "post_llm_call")]
    last = {c["event"]: c["history"] for c in calls if c["user_message"] == "and again"}
    assert last["pre_llm_call"] == ["long ago", "noted", "again", "ok", "and again"]
    assert last["post_llm_call"] == ["long ago", "noted", "again", "ok", "and again", "ok"]
    assert _turn_events(_calls(core_home))[-3:] == [
        ("pre_llm_call", "and again"), ("post_llm_call", "and again"),
        ("on_session_end", "and again")]


def test_a_turn_never_ends_before_an_earlier_one(core_home: Path) -> None:
    """A cancelled turn's end comes from the background lane (the kernel has no hook on the
    turn's thread when a turn is cancelled). When the lane is behind, the next turn's end must
    not overtake it: it is left to the lane too, behind it, so the plugin sees the ends in turn
    order, as Hermes fires them. The hooks are called as the kernel calls them, the lane's two
    calls last (a lane held up)."""
    drop_folder_plugin(core_home, "order", ORDER)
    host = bridge_host(core_home, CONFIG)
    try:
        provider: Any = host.activate_memory_providers()[0]
        session = Session("s1")
        provider.on_session_switch(session, None, SwitchReason.NEW)
        history: list[Message] = []

        def turn(text: str, *, reply: bool) -> Message:
            user = Message("user", text)
            history.append(user)
            provider.on_message(user, session)
            provider.prefetch(text, session)
            if reply:
                answer = Message("assistant", "ok", meta={"usage": {"input_tokens": 1}})
                history.append(answer)
                provider.on_message(answer, session)
            return user

        turn("whole", reply=True)
        assert [e for e in _turn_events(_calls(core_home)) if e[1] == "whole"][-1] == (
            "on_session_end", "whole")  # ended from its reply, before the turn returned
        stopped = turn("stopped", reply=False)  # cancelled before its model call
        after = turn("after", reply=True)
        provider.on_turn_cancelled(stopped, session)  # the lane catches up only now
        provider.sync_turn(after, history[-1], session, list(history))
    finally:
        host.shutdown()
    ends = [(e[1], c["interrupted"]) for e, c in zip(_turn_events(_calls(core_home)),
                                                     [c for c in _calls(core_home) if c["event"]
                                                      in ("pre_llm_call", "post_llm_call",
                                                          "on_session_end")], strict=True)
            if e[0] == "on_session_end"]
    assert ends == [("whole", False), ("stopped", True), ("after", False)]


#: a plugin whose per-turn on_session_end hangs (until the test lets it go)
HUNG = '''
import time
from hermes_constants import get_hermes_home


def on_session_end(turn_id, **kw):
    home = get_hermes_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "ends.txt", "a", encoding="utf-8") as out:
        out.write(turn_id + "\\n")
    bound = time.monotonic() + 60
    while not (home / "go").exists() and time.monotonic() < bound:
        time.sleep(0.05)


def register(ctx):
    ctx.register_hook("on_session_end", on_session_end)
'''


def test_a_hung_turn_end_costs_the_turns_one_wait(core_home: Path) -> None:
    """A plugin whose on_session_end hangs: the first turn waits for it most of the on_message
    deadline and goes on; while it still hangs, the next turns' ends are handed to the plugin's
    thread without a wait (they queue there, in order), so a hung plugin does not cost every
    turn a wait."""
    drop_folder_plugin(core_home, "hung", HUNG)
    agent = bridge_agent(core_home, "memory:\n  providers: [hermes-hung]\n"
                                    "hooks:\n  timeouts:\n    on_message: 2.5\n")
    own = core_home / "hermes-compat" / "hung"
    try:
        seconds = [agent.run_turn(text).seconds for text in ("one", "two", "three")]
        assert seconds[0] >= 1.5  # waited (80 % of 2.5 s) for the hung end
        assert max(seconds[1:]) < 1.5, seconds
    finally:
        own.mkdir(parents=True, exist_ok=True)
        (own / "go").write_text("go", encoding="utf-8")
        agent.close()
    # let go, the queued ends run in turn order on the plugin's thread
    bound = time.monotonic() + 20
    while len((own / "ends.txt").read_text(encoding="utf-8").splitlines()) < 3:
        assert time.monotonic() < bound, (own / "ends.txt").read_text(encoding="utf-8")
        time.sleep(0.05)  # poll interval while the plugin's thread catches up
    ends = (own / "ends.txt").read_text(encoding="utf-8").splitlines()
    assert [e.rsplit(":", 1)[1] for e in ends] == ["1", "2", "3"]
