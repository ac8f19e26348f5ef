"""The file memory inside the real agent loop; only the LLM's words are scripted (ScriptLLM)."""

from __future__ import annotations

import json

from agent_support import ScriptLLM, make_host, reply, tool_reply

from hermes_core.agent import Agent
from hermes_core.plugins.memory.file_memory import FileMemory


def test_a_tool_write_reaches_disk_but_not_the_running_prompt(home):
    llm = ScriptLLM([
        tool_reply(("memory", {"action": "add", "target": "user", "content": "Name: Ana"})),
        reply("Nice to meet you, Ana."),
        reply("Still here."),
        reply("Hello again."),
    ])
    agent = Agent(make_host(home, providers=[FileMemory]), llm)
    agent.run_turn("I'm Ana.")
    agent.run_turn("ping")
    # the tool result the model saw
    tool_messages = [m for m in llm.calls[1]["messages"] if m.role == "tool"]
    assert json.loads(tool_messages[0].content)["success"] is True
    # the running session keeps its prompt byte-for-byte; the file has the entry at once
    systems = [c["system"] for c in llm.calls]
    assert systems[0] == systems[1] == systems[2] and "Name: Ana" not in systems[0]
    assert (home / "memories" / "USER.md").read_text(encoding="utf-8") == "Name: Ana\n"
    # the memory tool was offered to the model
    assert any(t["name"] == "memory" for t in llm.calls[0]["tools"])

    agent.new_session()
    agent.run_turn("hi")
    assert "USER PROFILE (who the user is)" in llm.calls[3]["system"]
    assert "Name: Ana" in llm.calls[3]["system"]
    agent.close()
