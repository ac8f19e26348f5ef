"""Webhook input rules: a short secret is refused in config.yaml whatever the environment says
(issue 33 N6); a user key in a new conversation's attributes is refused with a true message (N9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from platform_support import EchoModel, archived, host_for
from serve_nodes import SECRET
from test_webhook_server import Running

from hermes_core.cli import cli
from hermes_core.dispatch import ConversationDispatcher
from hermes_core.plugins.platforms.webhook import SECRET_ENV
from hermes_core.testing import MessagesAPIServer
from hermes_core.types import IncomingMessage


def _set_secret(home: Path, value: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["config", "set", "webhook.secret", value])
    return result.exit_code, result.output


@pytest.mark.parametrize("env_secret", [None, SECRET])
def test_a_short_secret_is_refused_with_or_without_the_environment_variable(
        home, monkeypatch, env_secret):
    if env_secret is None:
        monkeypatch.delenv(SECRET_ENV, raising=False)
    else:
        monkeypatch.setenv(SECRET_ENV, env_secret)
    (home / "config.yaml").write_text("memory:\n  providers: []\n", encoding="utf-8")
    code, output = _set_secret(home, "short3")
    assert code == 1, output
    assert "6 characters" in output and "at least 16" in output
    assert "short3" not in (home / "config.yaml").read_text(encoding="utf-8")
    # a good secret is still written, and the environment still wins when serving
    code, output = _set_secret(home, "x" * 20)
    assert code == 0, output
    assert "x" * 20 in (home / "config.yaml").read_text(encoding="utf-8")


@pytest.fixture
def api():
    with MessagesAPIServer(EchoModel()) as server:
        yield server


def test_a_user_key_among_the_attributes_is_refused_with_a_true_message(home, api):
    running = Running(home, api)
    try:
        sent = running.post({"conversation_key": "c1", "text": "hello",
                             "attributes": {"user_id": "alice", "channel": "web"}})
        assert sent.status_code == 422, sent.text
        error = sent.json()["error"]
        assert "attributes.user_id" in error and "'user'" in error
        assert "another user key" not in error
        assert archived(home) == []  # refused before anything was stored
        # the same conversation with the key where it belongs works, attributes and all
        sent = running.post({"conversation_key": "c1", "text": "hello", "user": "alice",
                             "attributes": {"channel": "web"}})
        assert sent.status_code == 200, sent.text
        # a message of that conversation without its user key is told exactly that
        sent = running.post({"conversation_key": "c1", "text": "again"})
        assert sent.status_code == 403
        assert "names none" in sent.json()["error"]
        sent = running.post({"conversation_key": "c1", "text": "again", "user": "bob"})
        assert sent.status_code == 403 and "another user key" in sent.json()["error"]
    finally:
        running.stop()


def test_the_dispatcher_never_takes_a_user_key_from_attributes(home, api):
    host = host_for(home, api)
    dispatcher = ConversationDispatcher.open(host)
    try:
        result = dispatcher.run(IncomingMessage("webhook", "c2", "hi",
                                                attributes={"user_id": "mallory", "k": 1}))
        agent = dispatcher.agent_of("webhook", "c2")
        assert agent is not None and result.reply
        assert "user_id" not in agent.session.attributes
        assert agent.session.attributes["k"] == 1
        assert agent.session.attributes["conversation_key"] == "c2"
        # and the next message without a user key is served (nothing bound it to "mallory")
        assert dispatcher.run(IncomingMessage("webhook", "c2", "again")).reply
    finally:
        dispatcher.close()
        host.shutdown()
