"""Session hygiene: a resumed history that outgrew the window is compacted before the turn runs."""

from __future__ import annotations

from agent_support import CallLog, engine_class, make_host

from hermes_core.agent import Agent, estimate_tokens
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.testing import MessagesAPIServer, assert_well_formed
from hermes_core.types import Message, Session

WINDOW = 10_000


def _history(pairs: int, size: int) -> list[Message]:
    out = []
    for n in range(pairs):
        out += [Message("user", f"question {n} " + "x" * size),
                Message("assistant", f"answer {n} " + "y" * size)]
    return out


def _agent(home, api, history, **kwargs):
    log = CallLog()
    host = make_host(home, engine=engine_class(log, keep=1),
                     config_text=f"llm:\n  context_window: {WINDOW}\n")
    llm = AnthropicLLM(api_key="k", base_url=api.base_url, max_retries=0)
    session = Session(id="20250101_000000_abcdef", platform="webhook")
    return Agent(host, llm, session=session, history=history, **kwargs), log


def test_an_oversized_resumed_history_is_compacted_before_the_turn(home):
    history = _history(20, 900)  # ~9,300 estimated tokens: over 85 % of 10,000
    assert estimate_tokens(history) > 0.85 * WINDOW
    with MessagesAPIServer(default="fine") as api:
        agent, log = _agent(home, api, history)
        result = agent.run_turn("new question")
        agent.close()
    assert [c.trigger for c in result.compactions] == ["hygiene"]
    # compacted before the new message joined: the engine saw only the stored history
    compress = [e for e in log.names() if e.startswith("compress")]
    assert compress == [f"compress {len(history)} focus=None memory=''"]
    assert result.compactions[0].old_session_id == "20250101_000000_abcdef"
    sent = api.bodies[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]  # summary, last reply, new
    assert sent[-1]["content"][-1]["text"].endswith("new question")
    assert_well_formed(agent.history)


def test_the_api_reported_count_wins_over_the_estimate(home):
    small = _history(2, 50)
    with MessagesAPIServer(default="fine") as api:
        agent, _log = _agent(home, api, small, last_prompt_tokens=9_000)
        assert [c.trigger for c in agent.run_turn("hi").compactions] == ["hygiene"]
        agent.close()
    big = _history(20, 900)
    with MessagesAPIServer(default="fine") as api:
        agent, _log = _agent(home, api, big, last_prompt_tokens=2_000)
        assert agent.run_turn("hi").compactions == []
        agent.close()


def test_hygiene_checks_once_and_only_resumed_sessions(home):
    with MessagesAPIServer(default="fine") as api:
        agent, log = _agent(home, api, _history(2, 50))
        agent.run_turn("one")
        agent.run_turn("two")
        assert not [e for e in log.names() if e.startswith("compress")]
        agent.close()
        host = make_host(home, engine=engine_class(CallLog(), keep=1),
                         config_text=f"llm:\n  context_window: {WINDOW}\n")
        fresh = Agent(host, AnthropicLLM(api_key="k", base_url=api.base_url, max_retries=0),
                      last_prompt_tokens=9_500)
        assert fresh.run_turn("hello").compactions == []  # nothing stored to clean up
        fresh.close()
