"""``hermes-core chat`` in a real terminal: tmux types, the pane is read back.

The chat runs as its own process in a tmux pane (a real pty, readline, terminal width), talking
to the loopback Messages API of this test process through the real anthropic SDK. It needs tmux:
without it the run stops (the conftest says so), unless HERMES_CORE_TEST_TMUX_REQUIRED=0 lets it
skip. The tmux server uses a private socket and is killed at the end.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from openai_support import client_config
from platform_support import EchoModel, archived, platform_config, user_texts
from tmux_support import Pane, start_pane

from hermes_core.testing import MessagesAPIServer, OpenAIAPIServer, Reply

pytestmark = pytest.mark.needs_tmux


#: the terminal is what these tests read: the archive searches by words only, so that a log line of
#: the local embedder (installed in the test env; "did not answer within 10 s" on a loaded machine)
#: never lands in the middle of the pane
WORDS_ONLY = "embeddings:\n  embedder: none\n"


def start_chat(socket: str, home, *args: str) -> Pane:
    return start_pane(socket, home, "chat", *args)


def test_chat_in_a_real_terminal_streams_replies_runs_commands_and_continues(home, tmux_socket):
    with MessagesAPIServer(EchoModel()) as api:
        (home / "config.yaml").write_text(platform_config(api, WORDS_ONLY), encoding="utf-8")
        pane = start_chat(tmux_socket, home)
        pane.wait_for("Type a message")
        pane.type("my name is Ada")
        pane.wait_for("hermes> re: my name is Ada (1)")
        pane.type("/plugins")
        pane.wait_for("active: context-engine:compressor")
        pane.type("/quit")
        pane.wait_for("EXIT=0")

        again = start_chat(tmux_socket, home, "--continue")
        again.wait_for("Resumed session")
        again.type("what is my name?")
        again.wait_for("hermes> re: what is my name? (2)")
        seen = user_texts(api.bodies[-1])
        again.wait_prompt("you> ")  # the real state: readline is reading again
        again.tmux("send-keys", "-t", again.name, "C-d")  # end of input leaves too
        again.wait_for("EXIT=0")
    assert seen == ["my name is Ada", "what is my name?"]
    assert len({sid for sid, *_ in archived(home)}) == 1


def test_chat_streams_through_the_openai_client(home, tmux_socket):
    """llm.client: openai in config.yaml: the same chat, streamed through the real openai SDK from
    the loopback OpenAI-compatible server (its echo replies arrive in 4-character deltas)."""
    with OpenAIAPIServer(EchoModel()) as api:
        config = ("memory:\n  providers: [session_archive]\ncontext:\n  engine: compressor\n"
                  + WORDS_ONLY)
        config += client_config(api, openai_extra="  context_windows: {gpt-test: 32768}\n")
        (home / "config.yaml").write_text(config, encoding="utf-8")
        pane = start_chat(tmux_socket, home)
        pane.wait_for("Type a message")
        pane.type("my name is Ada")
        pane.wait_for("hermes> re: my name is Ada (1)")
        pane.type("what is my name?")
        pane.wait_for("hermes> re: what is my name? (2)")
        pane.type("/quit")
        screen = pane.wait_for("EXIT=0")
        bodies = api.bodies
    assert "warning" not in screen and "Traceback" not in screen  # the window is known
    assert len(bodies) == 2 and all(b["stream"] is True for b in bodies)
    assert user_texts(bodies[-1]) == ["my name is Ada", "what is my name?"]  # history resent
    assert len({sid for sid, *_ in archived(home)}) == 1


def test_chat_on_the_openai_client_without_its_key_exits_3_naming_the_variable(home, tmux_socket):
    config = client_config(None).replace("  api_key_env: null\n", "  api_key_env: HC_TEST_NO_SUCH_KEY\n")
    (home / "config.yaml").write_text(config, encoding="utf-8")
    pane = start_chat(tmux_socket, home)
    screen = pane.wait_for("EXIT=3")
    assert "export HC_TEST_NO_SUCH_KEY=" in screen and "api_key_env: null" in screen


def test_chat_in_a_terminal_without_a_key_says_so_and_exits_3(home, tmux_socket):
    (home / "config.yaml").write_text(platform_config(None), encoding="utf-8")
    pane = start_chat(tmux_socket, home)
    screen = pane.wait_for("EXIT=3")
    assert "no API key is configured" in screen and "hermes-core replay" in screen


class HeldModel(EchoModel):
    """An echo model that answers only once the test releases it (bounded), so keys can be typed
    while a turn is certainly in progress."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.arrived.set()
        self.release.wait(60)
        return super().__call__(body)


def test_ctrl_d_typed_while_a_reply_streams_ends_the_chat(home, tmux_socket):
    """Issue 17 item 15: Ctrl-D pressed during a turn (or right after a reply, before the prompt
    is back) reached the terminal in canonical mode, became an end-of-file marker readline never
    saw, and was ignored: the chat kept waiting."""
    model = HeldModel()
    with MessagesAPIServer(model) as api:
        (home / "config.yaml").write_text(platform_config(api, WORDS_ONLY), encoding="utf-8")
        pane = start_chat(tmux_socket, home)
        pane.wait_for("Type a message")
        pane.type("hello there")
        assert model.arrived.wait(30), "the model was never asked"
        pane.tmux("send-keys", "-t", pane.name, "C-d")  # typed while the turn runs
        model.release.set()
        pane.wait_for("re: hello there (1)")  # shown as "hermes> ^Dre: ...": the key came first
        screen = pane.wait_for("EXIT=0")
    assert "Traceback" not in screen
