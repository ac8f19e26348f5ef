"""``on_turn_start(turn_number, message)`` as Hermes calls it: once per user turn, right before the
turn's prefetch, numbered from 1 in each session; a compaction's child goes on counting and the
messages a compaction carries into it are no turns. Driven by a real Agent; only the model's
words are scripted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hermes_style
from conftest import bridge_agent, bridge_host, drop_folder_plugin

COUNTER = hermes_style.RECORDER.replace(
    "    def on_session_end(self, messages):\n",
    "    def on_turn_start(self, turn_number, message, **kwargs):\n"
    "        self._log('on_turn_start', turn=turn_number, message=message, kwargs=kwargs)\n\n"
    "    def on_session_end(self, messages):\n")


def test_turn_numbers_as_hermes_counts_them(core_home: Path) -> None:
    assert COUNTER != hermes_style.RECORDER
    drop_folder_plugin(core_home, "recorder", COUNTER)
    drop_folder_plugin(core_home, "keeplast", hermes_style.ENGINE.format())
    agent = bridge_agent(core_home, "memory:\n  providers: [hermes-recorder]\n"
                                     "context:\n  engine: hermes-keeplast\n")
    for text in ("u1", "u2", "u3"):
        agent.run_turn(text)
    assert agent.compact() is not None  # the child starts with messages carried over
    agent.run_turn("u4")
    agent.new_session()
    agent.run_turn("v1")
    agent.close()
    calls = [json.loads(line) for f in sorted(
        (core_home / "hermes-compat" / "recorder").rglob("calls.jsonl"))
        for line in f.read_text().splitlines()]
    starts = [(c["turn"], c["message"]) for c in calls if c["event"] == "on_turn_start"]
    assert starts == [(1, "u1"), (2, "u2"), (3, "u3"), (4, "u4"), (1, "v1")]
    # with no keyword arguments, as Hermes' turn passes none
    assert all(c["kwargs"] == {} for c in calls if c["event"] == "on_turn_start")


def test_an_on_turn_start_that_raises_costs_the_recall_nothing(core_home: Path) -> None:
    from hermes_core.types import Message, Session

    raising = hermes_style.RECORDER.replace(
        "    def on_session_end(self, messages):\n",
        "    def on_turn_start(self, turn_number, message, **kwargs):\n"
        "        raise RuntimeError('turn counter broke')\n\n"
        "    def on_session_end(self, messages):\n")
    assert raising != hermes_style.RECORDER
    drop_folder_plugin(core_home, "recorder", raising)
    host = bridge_host(core_home, "memory:\n  providers: [hermes-recorder]\n")
    try:
        provider: Any = host.activate_memory_providers()[0]
        session = Session("s-1")
        provider.sync_turn(Message("user", "I keep bees."), Message("assistant", "ok"), session, [])
        assert "I keep bees." in provider.prefetch("bees?", session)
        warnings = host.records["hermes_compat"].warnings
        assert any("on_turn_start() raised RuntimeError: turn counter broke" in w
                   for w in warnings)
    finally:
        host.shutdown()


def test_a_compaction_ends_the_old_session_first_as_in_hermes(core_home: Path) -> None:
    """Before a compaction moves the conversation to its child session, Hermes gives its
    providers the old session's ``on_session_end`` with the history being summarised, while
    the provider is still in that session."""
    bound = hermes_style.RECORDER.replace(
        '        self._log("on_session_end", count=len(messages),',
        '        self._log("on_session_end", bound=self.session, count=len(messages),')
    assert bound != hermes_style.RECORDER
    drop_folder_plugin(core_home, "recorder", bound)
    drop_folder_plugin(core_home, "keeplast", hermes_style.ENGINE.format())
    agent = bridge_agent(core_home, "memory:\n  providers: [hermes-recorder]\n"
                                     "context:\n  engine: hermes-keeplast\n")
    for text in ("u1", "u2"):
        agent.run_turn(text)
    first = agent.session.id
    assert agent.compact() is not None
    agent.run_turn("u3")
    agent.close()
    calls = [json.loads(line) for f in sorted(
        (core_home / "hermes-compat" / "recorder").rglob("calls.jsonl"))
        for line in f.read_text().splitlines()]
    ends = [(c["bound"], c["count"]) for c in calls if c["event"] == "on_session_end"]
    # the compaction's end (4 messages summarised, in the first session), then the exit's
    assert ends[0] == (first, 4) and len(ends) == 2
