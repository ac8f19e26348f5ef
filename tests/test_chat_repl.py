"""``hermes-core chat``: the terminal loop, its slash commands, --continue, and the no-key exit.

The loop reads from a list of lines here (the tmux test drives a real terminal); replies come from
the loopback Messages API through the real anthropic SDK; the archive is a real state.db.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from click.testing import CliRunner
from platform_support import EchoModel, archived, host_for, platform_config, user_texts

from hermes_core.cli import cli
from hermes_core.dispatch import connect_platform, disconnect_platform
from hermes_core.testing import Failure, MessagesAPIServer


def lines(*items: str):
    feed = iter(items)

    def read(prompt: str) -> str:
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    return read


def chat(home, api, *inputs: str, resume: bool = False,
         providers: str = "session_archive") -> str:
    host = host_for(home, api, providers=providers)
    platform, dispatcher = connect_platform(host, "cli")
    out = io.StringIO()
    try:
        platform.run(host, resume=resume, read=lines(*inputs), out=out)
    finally:
        disconnect_platform(host, platform, dispatcher)
        host.shutdown()
    return out.getvalue()


def test_messages_stream_and_are_archived(home):
    with MessagesAPIServer(EchoModel()) as api:
        out = chat(home, api, "hello there", "", "second one")
    assert "hermes> re: hello there (1)\n" in out
    assert "hermes> re: second one (2)\n" in out
    assert [(r, k.startswith("cli:"), c) for _s, r, k, c in archived(home)] == [
        ("user", True, "hello there"), ("assistant", True, "re: hello there (1)"),
        ("user", True, "second one"), ("assistant", True, "re: second one (2)")]


def test_a_warning_logged_during_a_reply_is_shown_after_it(home):
    """The terminal's log lines wait for the reply's line to end (they were printed in the middle
    of it: 'hermes> WARNING ...' then the reply)."""
    out = io.StringIO()
    terminal = logging.StreamHandler(out)  # stderr and stdout share one terminal
    terminal.setLevel(logging.WARNING)
    terminal.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    echo = EchoModel()

    def model(body):
        logging.getLogger("hermes_core.test").warning("the embedder is slow today")
        return echo(body)

    root = logging.getLogger()
    root.addHandler(terminal)
    try:
        with MessagesAPIServer(model) as api:
            host = host_for(home, api)
            platform, dispatcher = connect_platform(host, "cli")
            try:
                platform.run(host, read=lines("hello there"), out=out)
            finally:
                disconnect_platform(host, platform, dispatcher)
                host.shutdown()
    finally:
        root.removeHandler(terminal)
    text = out.getvalue()
    assert "hermes> re: hello there (1)\nWARNING hermes_core.test: the embedder is slow today\n" in text


def test_continue_resumes_the_latest_terminal_session(home):
    with MessagesAPIServer(EchoModel()) as api:
        chat(home, api, "my favourite colour is teal")
        first = {sid for sid, *_ in archived(home)}
        out = chat(home, api, "what is my favourite colour?", resume=True)
        seen = user_texts(api.bodies[-1])
        chat(home, api, "who are you?")
        fresh_seen = user_texts(api.bodies[-1])
    assert "Resumed session" in out and "(1 earlier message(s))" in out
    assert seen == ["my favourite colour is teal", "what is my favourite colour?"]
    assert fresh_seen == ["who are you?"]  # without --continue: a new session
    sessions = {sid for sid, *_ in archived(home)}
    assert first < sessions and len(sessions) == 2


def test_continue_with_nothing_stored_starts_a_new_session(home):
    with MessagesAPIServer(EchoModel()) as api:
        out = chat(home, api, "hi", resume=True)
    assert "No earlier terminal session" in out and "re: hi (1)" in out


def test_slash_commands(home):
    memories = home / "memories"
    memories.mkdir()
    (memories / "MEMORY.md").write_text("The deploy script lives in ops/deploy.sh", encoding="utf-8")
    with MessagesAPIServer(EchoModel()) as api:
        chat(home, api, "the wombat project uses postgres")
        out = chat(home, api, "/help", "/memory", "/search wombat", "/plugins", "/bogus",
                   "/search", "hello", "/new", "after new", "/compress databases", "/quit",
                   "never sent", providers="file_memory, session_archive")
        bodies = api.bodies
    assert "/compress [focus]" in out  # /help
    assert 'MEMORY.md (target "memory") now holds:' in out  # /memory, from the tool's curation
    assert "The deploy script lives in ops/deploy.sh" in out
    assert "match(es)" in out and "user: the wombat project uses postgres" in out  # /search
    assert "webhook" in out and "active: context-engine:compressor" in out  # /plugins
    assert "Unknown command '/bogus'" in out
    assert "Usage: /search WORDS" in out
    assert "New session" in out
    # after /new the model no longer sees the earlier turn
    assert user_texts(bodies[-1]) == ["after new"]
    # a two-message history is all protected: the engine says so instead of compacting
    assert "Nothing to compact" in out
    assert "never sent" not in [c for *_r, c in archived(home)]


def test_a_failed_turn_is_reported_and_the_chat_goes_on(home):
    with MessagesAPIServer([Failure(401, "invalid x-api-key"), "recovered"]) as api:
        out = chat(home, api, "first", "second")
    assert "error: the model call failed (auth)" in out
    assert "Check ANTHROPIC_API_KEY" in out
    assert "hermes> recovered" in out


def test_chat_without_a_key_exits_3_pointing_to_replay(home):
    (home / "config.yaml").write_text(platform_config(None), encoding="utf-8")
    result = CliRunner().invoke(cli, ["chat"], input="hello\n")
    assert result.exit_code == 3
    assert "no API key is configured" in result.output
    assert "hermes-core replay" in result.output
    assert "Traceback" not in result.output
    assert archived(home) == []


def test_chat_command_end_to_end_with_stdin(home):
    with MessagesAPIServer(EchoModel()) as api:
        (home / "config.yaml").write_text(platform_config(api), encoding="utf-8")
        result = CliRunner().invoke(cli, ["chat"], input="ping\n/quit\n")
        again = CliRunner().invoke(cli, ["chat", "-c"], input="pong\n")
    assert result.exit_code == 0, result.output
    assert "re: ping (1)" in result.output
    assert again.exit_code == 0 and "re: pong (2)" in again.output


@pytest.mark.parametrize("command", ["serve"])
def test_serve_without_a_secret_refuses_naming_the_key_and_variable(home, command):
    (home / "config.yaml").write_text(platform_config(None), encoding="utf-8")
    result = CliRunner().invoke(cli, [command, "--port", "0"])
    assert result.exit_code == 1
    assert "HERMES_CORE_WEBHOOK_SECRET" in result.output and "webhook.secret" in result.output
    assert "Traceback" not in result.output


def test_compress_then_continue_resumes_the_compacted_child(home):
    settings = "compression:\n  protect_first_n: 0\n  protect_last_n: 2\n  prune_only_below: 0\n"
    window = "  context_window: 8000\n"  # a small window: a tail of a few messages fills its budget
    with MessagesAPIServer(EchoModel()) as api:
        host = host_for(home, api, settings, llm_extra=window)
        platform, dispatcher = connect_platform(host, "cli")
        out = io.StringIO()
        try:
            platform.run(host, read=lines(*(f"{word} " + "lorem ipsum " * 80 for word in
                                            ("alpha", "bravo", "charlie", "delta")),
                                          "/compress databases", "echo"), out=out)
        finally:
            disconnect_platform(host, platform, dispatcher)
            host.shutdown()
        summary_requests = [b for b in api.bodies if "databases" in json.dumps(b)]
        host = host_for(home, api, settings, llm_extra=window)
        platform, dispatcher = connect_platform(host, "cli")
        try:
            platform.run(host, resume=True, read=lines("foxtrot"), out=io.StringIO())
        finally:
            disconnect_platform(host, platform, dispatcher)
            host.shutdown()
        resumed = user_texts(api.bodies[-1])
    assert "Compacted 8 -> " in out.getvalue()
    assert summary_requests, "the focus topic reached the summariser"
    # resumed from the compaction's child: the early turns are summarised, not replayed
    assert not any(t.startswith("alpha") for t in resumed) and resumed[-2:] == ["echo", "foxtrot"]
    rows = archived(home)
    assert len({sid for sid, *_ in rows}) == 2  # the original session and its compacted child
