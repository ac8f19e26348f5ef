"""A turn's end as a Hermes general plugin sees it: each end names its own turn, a cancelled turn
ends with ``interrupted=True``, and a ``pre_llm_call`` answer reaches only its own turn.

Hermes fires ``pre_llm_call`` before a turn's first model call and ``post_llm_call`` and the
per-turn ``on_session_end`` when ``run_conversation`` ends, with the same ``turn_id``; the bridge
fires the last two from the kernel's ``sync_turn`` (or ``on_turn_cancelled``) on the background
lane, which may run after the next turn began.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import Words, bridge_agent, bridge_host, drop_folder_plugin

from hermes_core.turn import CancelToken
from hermes_core.types import Message, Session

#: a general plugin logging what each turn hook is told about its turn
TURNS = '''
import json, time
from hermes_constants import get_hermes_home


def _log(event, **fields):
    home = get_hermes_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "calls.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"event": event, **fields}) + "\\n")


def pre_llm_call(user_message, turn_id, **kw):
    time.sleep(float((get_hermes_home() / "slow").read_text()) if (
        get_hermes_home() / "slow").exists() else 0)
    _log("pre_llm_call", user_message=user_message, turn_id=turn_id)
    return {"context": f"CONTEXT-FOR: {user_message}"}


def post_llm_call(user_message, turn_id, **kw):
    _log("post_llm_call", user_message=user_message, turn_id=turn_id)


def on_session_end(turn_id, completed, interrupted, session_id, **kw):
    _log("on_session_end", turn_id=turn_id, completed=completed, interrupted=interrupted,
         session_id=session_id)


def register(ctx):
    for hook in ("pre_llm_call", "post_llm_call", "on_session_end"):
        ctx.register_hook(hook, globals()[hook])
'''

CONFIG = "memory:\n  providers: [hermes-turns]\n"


def _calls(core_home: Path) -> list[dict[str, Any]]:
    path = core_home / "hermes-compat" / "turns" / "calls.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _of(calls: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [c for c in calls if c["event"] == event]


def test_each_turn_end_names_its_own_turn(core_home: Path) -> None:
    """Back-to-back turns: the first turn's sync_turn (on the background lane) runs after the
    second turn's prefetch. Its post_llm_call and on_session_end still carry the first turn's
    turn_id, the one its pre_llm_call got."""
    drop_folder_plugin(core_home, "turns", TURNS)
    host = bridge_host(core_home, CONFIG)
    try:
        provider: Any = host.activate_memory_providers()[0]
        session = Session("s1")
        history: list[Message] = []
        asked = []
        for text in ("first", "second"):
            user = Message("user", text)
            history.append(user)
            provider.on_message(user, session)
            provider.prefetch(text, session)
            asked.append(user)
        for user in asked:  # the lane catches up only now
            answer = Message("assistant", f"re {user.content}")
            provider.sync_turn(user, answer, session, [*history, answer])
        calls = _calls(core_home)
        started = [c["turn_id"] for c in _of(calls, "pre_llm_call")]
        assert len(set(started)) == 2
        assert [(c["user_message"], c["turn_id"]) for c in _of(calls, "post_llm_call")] == [
            ("first", started[0]), ("second", started[1])]
        assert [c["turn_id"] for c in _of(calls, "on_session_end")] == started
    finally:
        host.shutdown()


def test_a_cancelled_turn_ends_interrupted(core_home: Path) -> None:
    """Hermes fires on_session_end(completed=False, interrupted=True) at the end of an
    interrupted turn, and no post_llm_call; the kernel gives a cancelled turn no sync_turn."""
    drop_folder_plugin(core_home, "turns", TURNS)
    agent = bridge_agent(core_home, CONFIG)
    try:
        agent.run_turn("a whole turn")
        stopped = CancelToken()
        stopped.cancel("the user pressed stop")
        assert agent.run_turn("a stopped turn", cancel=stopped).cancelled
        agent.run_turn("after it")
        assert agent.worker.flush(10)
    finally:
        agent.close()
    calls = _calls(core_home)
    started = {c["user_message"]: c["turn_id"] for c in _of(calls, "pre_llm_call")}
    assert [c["user_message"] for c in _of(calls, "post_llm_call")] == ["a whole turn",
                                                                        "after it"]
    assert [(c["turn_id"], c["completed"], c["interrupted"])
            for c in _of(calls, "on_session_end")] == [
        (started["a whole turn"], True, False), (started["a stopped turn"], False, True),
        (started["after it"], True, False)]


class Prompts(Words):
    """The model's words ("ok"), and the user messages of each request as sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def respond(self, **kw: Any) -> Any:
        self.sent.append(kw["messages"][-1].content)
        return super().respond(**kw)


def _slow_agent(core_home: Path, seconds: float, timeout: float) -> tuple[Any, Prompts]:
    home = core_home / "hermes-compat" / "turns"
    home.mkdir(parents=True, exist_ok=True)
    (home / "slow").write_text(str(seconds))
    llm = Prompts()
    return bridge_agent(core_home, CONFIG + f"  prefetch_timeout: {timeout}\n", llm), llm


def _answered(core_home: Path, count: int, agent: Any) -> None:
    """Wait (bounded) until ``count`` pre_llm_call calls have finished on the plugin's thread and
    the kernel's turn lanes are idle again: the plugin logs its call before returning, and a lane
    still returning a late call when the next turn starts gives that turn no prefetch."""
    lanes = agent.host.hooks.engine.lanes
    bound = time.monotonic() + 20
    while time.monotonic() < bound:
        path = core_home / "hermes-compat" / "turns" / "calls.jsonl"
        if (path.exists() and len(_of(_calls(core_home), "pre_llm_call")) >= count
                and not [lane for lane in lanes.busy() if "-turn-" in lane]):
            return
        time.sleep(0.02)  # poll interval while the late call finishes
    raise AssertionError(f"pre_llm_call did not answer {count} times (busy: {lanes.busy()})")


def test_a_late_pre_llm_call_answer_never_reaches_another_turn(core_home: Path) -> None:
    """A pre_llm_call slower than the prefetch deadline misses its turn; its answer, computed
    for that turn's message, is dropped: the kernel must not serve it at the next turn as a
    late provider's last answer."""
    drop_folder_plugin(core_home, "turns", TURNS)
    agent, llm = _slow_agent(core_home, seconds=0.6, timeout=0.2)
    try:
        agent.run_turn("one")
        _answered(core_home, 1, agent)  # the late call has ended: its answer came after the deadline
        agent.run_turn("two")  # late again
        _answered(core_home, 2, agent)
    finally:
        agent.close()
    assert len(llm.sent) == 2
    assert not any("CONTEXT-FOR" in text for text in llm.sent), llm.sent


def test_a_longer_prefetch_deadline_waits_for_a_slow_pre_llm_call(core_home: Path) -> None:
    """The bounded longer wait: with memory.prefetch_timeout above the hook's time, its answer
    reaches its own turn, as Hermes waits for it."""
    drop_folder_plugin(core_home, "turns", TURNS)
    agent, llm = _slow_agent(core_home, seconds=0.4, timeout=10)
    try:
        agent.run_turn("one")
        agent.run_turn("two")
    finally:
        agent.close()
    assert ["CONTEXT-FOR: one" in llm.sent[0], "CONTEXT-FOR: two" in llm.sent[1]] == [True, True]
    assert "CONTEXT-FOR: one" not in llm.sent[1]
