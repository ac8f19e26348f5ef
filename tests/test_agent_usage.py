"""Each model call's usage rides on its assistant message: the archive totals it, and a resumed
session knows the prompt size the API last reported (what the pre-turn hygiene check reads)."""

from __future__ import annotations

import dataclasses

from agent_support import ScriptLLM, reply

from hermes_core.agent import Agent
from hermes_core.testing import make_host
from hermes_core.types import Message, Usage

CONFIG = "memory:\n  providers: [session_archive]\ncontext:\n  engine: compressor\n"


def test_usage_is_archived_and_read_back_on_resume(hermes_home):
    usage = Usage(input_tokens=1200, output_tokens=40, cache_read_tokens=300, model="m")
    host = make_host(hermes_home, config=CONFIG)
    agent = Agent.create(host, ScriptLLM([reply("one", usage), reply("two", usage)]))
    agent.run_turn("first")
    agent.run_turn("second")
    session_id = agent.session.id
    assert agent.history[-1].meta["usage"]["input_tokens"] == 1200
    agent.close()

    host = make_host(hermes_home, config=CONFIG)
    try:
        host.activate_memory_providers()
        (archive,) = host.instances.values()
        record = archive.archive.get_session(session_id)
        assert (record.input_tokens, record.output_tokens, record.cache_read_tokens) == (2400, 80, 600)
        session, history = host.pm.hook.load_session(platform="cli", conversation_key=None,
                                                      session_id=session_id)
        resumed = Agent(host, ScriptLLM([]), session=session, history=history)
        assert resumed.last_prompt_tokens == 1500
        assert Agent(host, ScriptLLM([]), session=session, history=history,
                     last_prompt_tokens=7).last_prompt_tokens == 7
    finally:
        host.shutdown()


def test_carried_over_usage_is_not_the_current_size(hermes_home):
    old = Message("assistant", "before the compaction",
                  meta={"usage": Usage(input_tokens=150_000).as_meta(), "carried_over": "s0"})
    host = make_host(hermes_home, config=CONFIG)
    try:
        agent = Agent(host, ScriptLLM([]), history=[Message("user", "hi"), old])
        assert agent.last_prompt_tokens is None  # estimated instead
        fresh = dataclasses.replace(old, meta={"usage": old.meta["usage"]})
        assert Agent(host, ScriptLLM([]), history=[fresh]).last_prompt_tokens == 150_000
    finally:
        host.shutdown()


def test_usage_meta_round_trip_and_junk():
    usage = Usage(1, 2, 3, 4, model="x")
    assert Usage.from_meta(usage.as_meta()) == usage
    assert Usage.from_meta("junk") is None
    assert Usage.from_meta({"input_tokens": "many"}) is None
