"""The todo tool and the on_post_compress hook, through the real agent loop.

The model's words come from the loopback Messages API (the only fake); the real anthropic SDK
talks to it through AnthropicLLM.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agent_support import CallLog, engine_class, make_host

from hermes_core import hookimpl
from hermes_core.agent import Agent
from hermes_core.plugins.llm.anthropic import AnthropicLLM
from hermes_core.plugins.tools import todo
from hermes_core.testing import MessagesAPIServer, Reply, assert_well_formed
from hermes_core.types import Session

PLAN = [
    {"id": "1", "content": "Read the failing test", "status": "completed"},
    {"id": "2", "content": "Fix the date parser", "status": "in_progress"},
    {"id": "3", "content": "Run the whole suite", "status": "pending"},
]


def _llm(api: MessagesAPIServer) -> AnthropicLLM:
    return AnthropicLLM(api_key="test", base_url=api.base_url, max_retries=0, timeout=10)


def _tool_results(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        if isinstance(message["content"], list):
            out += [b["content"] for b in message["content"] if b.get("type") == "tool_result"]
    return out


def _texts(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [b.get("text", "") for b in content if b.get("type") == "text"]
    return "\n".join(parts)


# ------------------------------------------------------------------------------------ the tool


def test_replace_merge_and_read():
    boards = todo.TodoBoards()
    session = Session(id="s-1")
    items = boards.write(session, [todo.TodoItem(**item) for item in PLAN], merge=False)
    assert [i["status"] for i in items] == ["completed", "in_progress", "pending"]
    boards.write(session, [todo.TodoItem(id="3", status="in_progress"),
                           todo.TodoItem(id="4", content="Write the changelog")], merge=True)
    got = boards.get(session)
    assert [(i["id"], i["status"]) for i in got] == [
        ("1", "completed"), ("2", "in_progress"), ("3", "in_progress"), ("4", "pending")]
    assert got[2]["content"] == "Run the whole suite"  # a status-only merge keeps the content
    # open items: in progress first, then pending; completed ones are left out
    assert [i["id"] for i in boards.open_items(session)] == ["2", "3", "4"]


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="have no content"):
        todo.TodoInput.model_validate({"todos": [{"id": "1"}]})
    boards = todo.TodoBoards()
    with pytest.raises(todo.ToolError, match="not on the list; give its content"):
        boards.write(Session(id="s"), [todo.TodoItem(id="9")], merge=True)
    with pytest.raises(ValueError):
        todo.TodoInput.model_validate({"todos": [{"id": "1", "content": "x", "status": "later"}]})


def test_a_child_session_adopts_its_parents_list_and_the_store_is_bounded():
    boards = todo.TodoBoards(limit=3)
    parent, child = Session(id="p"), Session(id="c", parent_session_id="p")
    boards.write(parent, [todo.TodoItem(id="1", content="a")], merge=False)
    assert boards.open_items(child) == []  # open_items never adopts
    assert [i["content"] for i in boards.get(child)] == ["a"]
    assert boards.get(parent) == []  # moved, not copied
    for n in range(5):
        boards.write(Session(id=f"other-{n}"), [todo.TodoItem(id="1", content="x")], merge=False)
    assert boards.get(child) == []  # least recently used, dropped first


def test_snapshot_text():
    assert todo.snapshot_text([]) is None
    text = todo.snapshot_text([{"id": "2", "content": "Fix it", "status": "in_progress"}])
    assert text is not None and "- [in_progress] 2. Fix it" in text and "still open" in text


# ------------------------------------------------------------------------- through the agent


def test_the_todo_snapshot_follows_a_compaction(home):
    """Manual compaction between turns: the open items ride on the compacted history's last
    user message, and the list answers from the child session."""
    log = CallLog()
    api = MessagesAPIServer([
        Reply(tool_calls=[{"name": "todo", "input": {"todos": PLAN}}]),
        "Working on the parser now.",
        Reply(tool_calls=[{"name": "todo", "input": {}}]),
        "Still on item 2.",
    ])
    host = make_host(home, engine=engine_class(log, keep=1), extra_plugins=[("todo", todo)])
    with api:
        agent = Agent(host, _llm(api))
        agent.run_turn("Fix the failing date test, step by step.")
        old_session = agent.session.id
        record = agent.compact()
        assert record is not None and record.carried_note is not None
        assert "- [in_progress] 2. Fix the date parser" in record.carried_note
        assert "- [pending] 3. Run the whole suite" in record.carried_note
        assert "Read the failing test" not in record.carried_note  # completed: not carried
        assert agent.session.id != old_session
        assert_well_formed(agent.history)
        assert record.carried_note in "\n".join(m.content for m in agent.history if m.role == "user")

        agent.run_turn("Where are we?")
        body = api.bodies[-2]  # the call that asked the todo tool for the list
        listed = json.loads(_tool_results(api.bodies[-1])[-1])
        assert [i["id"] for i in listed["todos"]] == ["1", "2", "3"]  # followed to the child
        assert "Fix the date parser" in _texts(body)  # the note was sent to the model
        assert_well_formed(agent.history)
        agent.close()


def test_hook_on_post_compress(home):
    """Every implementation's note is merged into the user side; an auto compaction at the start
    of a turn puts it ahead of the new request, which stays the last thing the model reads."""
    log = CallLog()

    class Notes:
        @hookimpl
        def on_post_compress(self, messages, session):
            log.add(f"on_post_compress {len(messages)} {session.id}")
            return "Open: finish the report"

    class Silent:
        @hookimpl
        def on_post_compress(self, messages, session):
            return None

    api = MessagesAPIServer(default="ok")
    compress_when = lambda messages: len(messages) >= 5  # noqa: E731
    host = make_host(home, engine=engine_class(log, compress_when=compress_when, keep=1),
                     extra_plugins=[("notes", Notes()), ("silent", Silent())])
    with api:
        agent = Agent(host, _llm(api))
        agent.run_turn("one")
        agent.run_turn("two")
        first = agent.session.id
        result = agent.run_turn("three")  # 5 messages: compacts before the call
        assert len(result.compactions) == 1
        assert result.compactions[0].carried_note == "Open: finish the report"
        assert [e for e in log.names() if e.startswith("on_post_compress")] == [
            f"on_post_compress 1 {first}"]
        user_turns = [m for m in api.bodies[-1]["messages"] if m["role"] == "user"]
        last_text = user_turns[-1]["content"][-1]["text"]
        assert last_text.startswith("Open: finish the report\n\n")
        assert last_text.rstrip().endswith("three")
        assert_well_formed(agent.history)
        agent.close()
