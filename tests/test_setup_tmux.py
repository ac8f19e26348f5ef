"""``hermes-core setup`` in a real terminal (tmux types, the pane is read back): the questions,
the config it writes (which validates), ``setup --check`` naming a dead endpoint, and Ctrl-C
half-way writing nothing. Every wait is on what the screen shows, with a deadline."""

from __future__ import annotations

import socket

import pytest
import yaml
from click.testing import CliRunner
from tmux_support import start_pane

from hermes_core.cli import cli

pytestmark = pytest.mark.needs_tmux


def test_setup_asks_writes_a_valid_config_and_check_names_the_dead_endpoint(home, tmux_socket):
    held = socket.socket()
    held.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused
    url = f"http://127.0.0.1:{held.getsockname()[1]}"
    try:
        pane = start_pane(tmux_socket, home, "setup", env={"ANTHROPIC_API_KEY": "test-key"})
        pane.wait_for("Model client [anthropic]:")
        pane.type("anthropic")
        pane.wait_for("Model (anthropic) [claude-sonnet-4-6]:")
        pane.type("claude-tmux")
        pane.wait_for("Base URL (- for the client's default endpoint) [-]:")
        pane.type(url)
        pane.wait_for("Memory providers, in order (comma-separated) "
                      "[file_memory, session_archive, skills]:")
        pane.type("session_archive, typo")
        pane.wait_for("unknown memory provider 'typo'")
        pane.type("session_archive")
        pane.wait_for("Embedder [auto]:")
        pane.type("none")
        pane.wait_for("Memory scope (global: one memory; user: one per user) (global, user) "
                      "[global]:")
        pane.type("user")
        screen = pane.wait_for("EXIT=0")
        assert "Next: 'hermes-core setup --check'" in screen
        data = yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))
        assert data["llm"] == {"client": "anthropic", "model": "claude-tmux", "base_url": url}
        assert data["memory"] == {"providers": ["session_archive"], "scope": "user"}
        assert CliRunner().invoke(cli, ["config", "validate"]).exit_code == 0

        check = start_pane(tmux_socket, home, "setup", "--check", "--timeout", "5",
                           env={"ANTHROPIC_API_KEY": "test-key"})
        screen = check.wait_for("EXIT=1")
    finally:
        held.close()
    assert f"[FAIL] model: client anthropic, model claude-tmux, base URL {url}: the endpoint " \
        "does not answer" in screen
    assert "fix: start the server, or fix the base URL (llm.base_url)" in screen
    assert "Traceback" not in screen


def test_ctrl_c_half_way_writes_nothing(home, tmux_socket):
    (home / "config.yaml").write_text("memory:\n  scope: user\n", encoding="utf-8")
    pane = start_pane(tmux_socket, home, "setup")
    pane.wait_for("Model client [anthropic]:")
    pane.type("anthropic")
    pane.wait_for("Model (anthropic)")
    pane.tmux("send-keys", "-t", pane.name, "C-c")
    screen = pane.wait_for("EXIT=1")
    assert "Aborted!" in screen and "Traceback" not in screen
    assert (home / "config.yaml").read_text() == "memory:\n  scope: user\n"
    assert not (home / "config.yaml.bak").exists()
