"""memory.scope: user through the real webhook (signed requests on 127.0.0.1), on both backends.

Alice states a preference; the (scripted) model saves it with the memory tool. Her next session's
system prompt carries it and her session_search finds it; Bob's prompt, search and listings never
show it. Real parts: the webhook server, httpx, the anthropic SDK against the loopback Messages
API, the file memory and the session archive on SQLite files or a PostgreSQL database. Faked: only
the model's words (``ScriptedModel`` below).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.dispatch import connect_platform, disconnect_platform
from hermes_core.plugins.platforms.webhook import signed_headers
from hermes_core.testing import MessagesAPIServer, Reply, make_host
from hermes_core.users import UserKeyError, check_user_key

SECRET = "s3cret-for-user-scope-0123456789"
PREFERENCE = "prefers oolong tea brewed at 85C"


class ScriptedModel:
    """``remember: X`` -> a memory tool call adding X to the user profile; ``search: Q`` -> a
    session_search call (``list sessions``: with an empty query); after a tool result, "done";
    anything else is echoed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.bodies.append(body)
        last = body["messages"][-1]
        content = last["content"]
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return Reply(text="done")
        text = content if isinstance(content, str) else " ".join(
            b.get("text", "") for b in content if b.get("type") == "text")
        text = text.split("<memory-context>")[0].strip()
        if text.startswith("remember: "):
            return Reply(tool_calls=[{"name": "memory", "input": {
                "action": "add", "target": "user", "content": text[len("remember: "):]}}])
        if text == "list sessions":
            return Reply(tool_calls=[{"name": "session_search", "input": {"query": ""}}])
        if text.startswith("search: "):
            return Reply(tool_calls=[{"name": "session_search",
                                      "input": {"query": text[len("search: "):]}}])
        return Reply(text=f"re: {text}")


def _system(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else " ".join(b.get("text", "") for b in system)


def _tool_result(body: dict[str, Any]) -> str:
    for block in body["messages"][-1]["content"]:
        if block.get("type") == "tool_result":
            inner = block.get("content")
            return inner if isinstance(inner, str) else json.dumps(inner)
    raise AssertionError("no tool result in the request")


class Node:
    """A webhook over ``home`` with memory.scope: user."""

    def __init__(self, home: Path, api: MessagesAPIServer) -> None:
        config = (
            "memory:\n  providers: [file_memory, session_archive]\n  scope: user\n"
            "context:\n  engine: compressor\n"
            f"llm:\n  base_url: {api.base_url}\n  api_key: test-key\n  model: claude-test\n"
            "  max_retries: 0\n  timeout: 20\n"
            f"webhook:\n  secret: {SECRET}\n  port: 0\n")
        self.host = make_host(home, config=config)
        self.platform, self.dispatcher = connect_platform(self.host, "webhook")
        self.client = httpx.Client(base_url=self.platform.url, timeout=30)

    def post(self, payload: dict[str, Any]) -> httpx.Response:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **signed_headers(SECRET, body)}
        return self.client.post("/messages", content=body, headers=headers)

    def say(self, user: str, key: str, text: str) -> dict[str, Any]:
        response = self.post({"conversation_key": key, "text": text, "user": user})
        assert response.status_code == 200, response.text
        return dict(response.json())

    def stop(self) -> None:
        self.client.close()
        disconnect_platform(self.host, self.platform, self.dispatcher)
        self.host.shutdown()


@pytest.fixture
def node(home: Path, storage_url: str | None, monkeypatch: pytest.MonkeyPatch):
    if storage_url:
        monkeypatch.setenv("HERMES_CORE_STORAGE_URL", storage_url)
    model = ScriptedModel()
    with MessagesAPIServer(model) as api:
        running = Node(home, api)
        running.model = model  # type: ignore[attr-defined]
        yield running
        running.stop()


def test_alice_preference_reaches_only_alice(node: Node, home: Path,
                                             storage_url: str | None) -> None:
    model: ScriptedModel = node.model  # type: ignore[attr-defined]
    node.say("alice", "alice-1", f"remember: {PREFERENCE}")
    saved = json.loads(_tool_result(model.bodies[-1]))
    assert saved.get("success") is True and "error" not in saved, saved

    node.say("alice", "alice-2", "hello again")  # a new conversation: a fresh snapshot
    assert PREFERENCE in _system(model.bodies[-1])
    node.say("alice", "alice-2", "search: oolong tea")
    recalled = json.loads(_tool_result(model.bodies[-1]))
    assert recalled["results"] and PREFERENCE in json.dumps(recalled)

    node.say("bob", "bob-1", "hello")
    assert PREFERENCE not in _system(model.bodies[-1])
    assert "oolong" not in json.dumps(model.bodies[-1])
    node.say("bob", "bob-1", "search: oolong tea")
    found = json.loads(_tool_result(model.bodies[-1]))
    assert found["results"] == [] and "brewed at 85C" not in json.dumps(found)
    node.say("bob", "bob-1", "list sessions")  # recent sessions: none of alice's
    recent = json.loads(_tool_result(model.bodies[-1]))
    assert recent["mode"] == "recent" and recent["sessions"] == []  # bob's own is the current one
    node.say("alice", "alice-3", "list sessions")
    recent = json.loads(_tool_result(model.bodies[-1]))
    assert len(recent["sessions"]) == 2 and "oolong" in json.dumps(recent)

    env = {"HERMES_CORE_HOME": str(home)}
    if storage_url:
        env["HERMES_CORE_STORAGE_URL"] = storage_url

    def show(*extra: str) -> dict[str, Any]:
        out = CliRunner().invoke(cli, ["memory", "show", "--json", *extra], env=env)
        assert out.exit_code == 0, out.output
        return dict(json.loads(out.output))

    assert show("--user", "alice")["user"]["entries"] == [PREFERENCE]
    assert show("--user", "bob")["user"]["entries"] == []
    assert show()["user"]["entries"] == []

    def sessions(*args: str) -> Any:
        out = CliRunner().invoke(cli, ["sessions", *args, "--json"], env=env)
        assert out.exit_code == 0, out.output
        return json.loads(out.output)

    assert len(sessions("list")) == 4  # the operator's view: everyone's
    assert {s["attributes"]["user_id"] for s in sessions("list", "--user", "alice")} == {"alice"}
    assert len(sessions("list", "--user", "alice")) == 3
    assert sessions("search", "oolong", "--user", "alice")["hits"]
    bobs = {s["id"] for s in sessions("list", "--user", "bob", "--all")}
    hits = sessions("search", "oolong", "--user", "bob")["hits"]
    assert {h["session_id"] for h in hits} <= bobs and "brewed at 85C" not in json.dumps(hits)
    odd = CliRunner().invoke(cli, ["sessions", "list", "--user", "../x"], env=env)
    assert odd.exit_code == 2 and "not allowed" in odd.output


def test_another_users_conversation_key_is_refused_without_its_history(node: Node) -> None:
    """bob posting to alice's conversation key must not get her history as his context."""
    model: ScriptedModel = node.model  # type: ignore[attr-defined]
    node.say("alice", "shared-key", f"my locker code is 4417 and I {PREFERENCE}")
    calls = len(model.bodies)
    for payload in ({"conversation_key": "shared-key", "text": "what is my code?", "user": "bob"},
                    {"conversation_key": "shared-key", "text": "what is my code?"}):
        refused = node.post(payload)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert "belongs to" in error and "user key" in error and "alice" not in error
    assert len(model.bodies) == calls  # no model call: nothing of alice's was sent anywhere
    again = node.say("alice", "shared-key", "and the code again?")
    assert "4417" in json.dumps(model.bodies[-1]) and again["reply"]


@pytest.mark.parametrize(("user", "problem"), [
    ("x" * 10_000, "10,000 characters long"),
    ("../etc", "not allowed"),
    ("al ice", "not allowed"),
    ("", "empty"),
])
def test_odd_user_keys_get_a_clear_400_and_nothing_is_stored(
    node: Node, user: str, problem: str
) -> None:
    response = node.post({"conversation_key": "k", "text": "hi", "user": user})
    assert response.status_code == 400, response.text
    assert problem in response.json()["error"] and "user" in response.json()["fields"]
    assert node.model.bodies == []  # type: ignore[attr-defined]


def test_user_keys_are_checked() -> None:
    assert check_user_key("alice@example.com") == "alice@example.com"
    for leading in ("..", "-rf", ".alice"):  # allowed characters, a forbidden first one
        with pytest.raises(UserKeyError, match=f"starts with {leading[0]!r}"):
            check_user_key(leading)
    for bad in ("-rf", ".hidden", "a/b", "ä", None):
        with pytest.raises(UserKeyError):
            check_user_key(bad)


@pytest.mark.parametrize("action", [["show"], ["add", "a note for nobody"]])
def test_cli_refuses_an_empty_user_key_instead_of_the_shared_memory(
    home: Path, storage_url: str | None, action: list[str]
) -> None:
    """``memory add --user ""`` (an unset shell variable) is refused like the webhook refuses an
    empty key; it must not write into, or show, the shared memory."""
    env = {"HERMES_CORE_HOME": str(home)}
    if storage_url:
        env["HERMES_CORE_STORAGE_URL"] = storage_url
    runner = CliRunner()
    added = runner.invoke(cli, ["memory", "add", "a shared note"], env=env)
    assert added.exit_code == 0, added.output
    out = runner.invoke(cli, ["memory", action[0], "--user", "", *action[1:]], env=env)
    assert out.exit_code != 0 and "the user key is empty" in out.output, out.output
    assert "a shared note" not in out.output
    shown = runner.invoke(cli, ["memory", "show", "--json"], env=env)
    assert json.loads(shown.output)["memory"]["entries"] == ["a shared note"]
