"""Secrets of the surfaces built after issue 17 stay out of what the CLI prints, and the files the
new features write are private (mode 0600), like state.db."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from hermes_core.config import redacted

TOKEN = "HDR9f3c1e7a5b2d4068"
PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

MCP_CONFIG = f"""
mcp:
  servers:
    tracker:
      url: http://127.0.0.1:9/mcp
      headers:
        Authorization: "Bearer {TOKEN}"
        X-Trace: "plain-value"
    query:
      url: "http://bob:{PAT[:8]}x@127.0.0.1:9/mcp?token={TOKEN}&page=2"
    local:
      command: /bin/true
      env:
        GITHUB_PAT: "{PAT}"
        SERVICE_URL_SECRETLESS: "{PAT}"
        LOG_LEVEL: warn
"""


def test_mcp_server_headers_and_env_credentials_are_redacted_everywhere(run, home: Path) -> None:
    (home / "config.yaml").write_text(MCP_CONFIG, encoding="utf-8")
    for args in (("config", "show"), ("config", "show", "--json"), ("config", "get", "mcp"),
                 ("config", "get", "mcp.servers.tracker.headers")):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert TOKEN not in result.output, args
        assert PAT not in result.output, args
    shown = json.loads(run("config", "show", "--json").output)["mcp"]["servers"]
    assert shown["query"]["url"] == "http://bob:***@127.0.0.1:9/mcp?token=***&page=2"
    assert shown["tracker"]["headers"] == {"Authorization": "**********", "X-Trace": "plain-value"}
    assert shown["local"]["env"]["LOG_LEVEL"] == "warn"  # what is no secret stays readable


@pytest.mark.parametrize(("value", "secret"), [
    ("Bearer abcdefgh12345678", True),
    ("basic dXNlcjpwYXNzd29yZA==", True),
    ("Bearer ${TRACKER_TOKEN}", False),
    ("sk-ant-api03-" + "x" * 24, True),
    ("AKIA" + "ABCDEFGHIJKLMNOP", True),
    ("a bearer of news", False),
    ("warn", False),
])
def test_credentials_are_recognised_by_their_form_under_any_key(value: str, secret: bool) -> None:
    out = redacted({"anything": {"X_Custom": value}})["anything"]["X_Custom"]
    assert (out == "**********") is secret


def test_header_names_that_carry_credentials(value: str = "opaque-but-secret-1234") -> None:
    for name in ("Authorization", "Proxy-Authorization", "Cookie", "X-Auth", "GITHUB_PAT"):
        assert redacted({name: value}) == {name: "**********"}, name
    assert redacted({"Accept": value}) == {"Accept": value}


ARG_SECRETS = ("plainsecret999", "mysecretvalue123", "hunter2hunter2", "s3cr3tvalue77")


def test_credentials_in_a_stdio_servers_args_are_redacted(run, home: Path) -> None:
    """An MCP server's key passed on its command line (``--api-key VALUE``, ``--token=VALUE``)
    was printed by config show and config get, under a key ('args') that names no secret."""
    (home / "config.yaml").write_text(
        "mcp:\n  servers:\n    notes:\n      command: /bin/true\n      args: [--api-key, "
        "plainsecret999, --token=mysecretvalue123, --password, hunter2hunter2, "
        "DB_PASSWORD=s3cr3tvalue77, --max-tokens, '100', --verbose, /srv/notes]\n",
        encoding="utf-8")
    for args in (("config", "show"), ("config", "show", "--json"), ("config", "get", "mcp"),
                 ("config", "get", "mcp.servers.notes.args")):
        result = run(*args)
        assert result.exit_code == 0, result.output
        for secret in ARG_SECRETS:
            assert secret not in result.output, (args, secret)
    shown = json.loads(run("config", "get", "mcp.servers.notes.args").output)
    assert shown == ["--api-key", "**********", "--token=**********", "--password", "**********",
                     "DB_PASSWORD=**********", "--max-tokens", "100", "--verbose", "/srv/notes"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sessions_export_file_is_private(home: Path, run) -> None:
    from hermes_core.plugins.memory.session_archive import SessionArchive
    from hermes_core.types import Message, Session

    with SessionArchive(home / "state.db") as archive:
        archive.open_session(Session(id="s1", title="Private talk"))
        archive.append_message("s1", Message("user", "my doctor said the results are fine"))
    out = home.parent / "exports" / "all.jsonl"
    out.parent.mkdir()
    previous = os.umask(0o022)  # the usual umask: a plain open() would give 0644
    try:
        result = run("sessions", "export", "--all", "-o", str(out))
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    assert "my doctor said" in out.read_text(encoding="utf-8")
    assert _mode(out) == 0o600  # whole conversations: private like state.db
    assert _mode(home / "state.db") == 0o600
