"""``hermes-core setup``: driven by flags and by piped answers, the config it writes, its diff and
backup, bad input, and ``setup --check`` against the loopback Messages API (only the model's
words are fake) and against a closed port."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from hermes_core.cli import cli
from hermes_core.testing import Failure, MessagesAPIServer

THIRD_PARTY = """
from hermes_core import MemoryProvider, hookimpl

class Notes(MemoryProvider):
    name = "notes"
    description = "Notes kept by a third-party plugin."

@hookimpl
def register_memory_providers(register):
    register(Notes)
"""

#: a third-party model client with its own section: base URL and key variable settings
CLIENT = """
from pydantic import BaseModel
from hermes_core import hookimpl
from hermes_core.kinds import LLMClient
from hermes_core.llm import LLMResponse

class Echo(LLMClient):
    name = "echo"
    description = "Repeats the last user message."

    class Config(BaseModel):
        base_url: str = "http://127.0.0.1:1"
        api_key_env: str = "ECHO_KEY"

    def respond(self, *, system, messages, max_tokens, model=None, timeout=None, tools=None,
                on_text=None):
        return LLMResponse(text=messages[-1].content, model=model)

@hookimpl
def register_llm_clients(register):
    register(Echo)
"""


@pytest.fixture
def run(home):
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(cli, list(args), input=input, catch_exceptions=False)

    return invoke


def written(home: Path) -> dict:
    return yaml.safe_load((home / "config.yaml").read_text(encoding="utf-8"))


FLAGS = ("setup", "--yes", "--client", "anthropic", "--model", "claude-test",
         "--provider", "session_archive", "--provider", "file_memory", "--embedder", "none",
         "--scope", "user")


def test_flags_write_a_config_that_validates_and_holds_no_key(run, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    result = run(*FLAGS)
    assert result.exit_code == 0, result.output
    data = written(home)
    assert data["llm"] == {"client": "anthropic", "model": "claude-test"}
    assert data["memory"] == {"providers": ["session_archive", "file_memory"], "scope": "user"}
    assert data["embeddings"] == {"embedder": "none"}
    assert "sk-ant" not in (home / "config.yaml").read_text()
    assert "$ANTHROPIC_API_KEY, which is set" in result.output
    assert run("config", "validate").exit_code == 0
    again = run(*FLAGS)  # the same answers: nothing to change, no backup
    assert "nothing changed" in again.output and not (home / "config.yaml.bak").exists()


def test_piped_answers_drive_the_prompts_and_a_bad_name_is_asked_again(run, home):
    answers = ["anthropic", "claude-piped", "-", "session_archive, nope", "session_archive, skills",
               "bogus", "none", "global"]
    result = run("setup", input="\n".join(answers) + "\n")
    assert result.exit_code == 0, result.output
    assert "unknown memory provider 'nope'; valid: " in result.output
    assert "file_memory" in result.output.split("unknown memory provider 'nope'")[1]
    assert "unknown embedder 'bogus'; valid: auto, none" in result.output
    data = written(home)
    assert data["llm"]["model"] == "claude-piped" and "base_url" not in data["llm"]
    assert data["memory"]["providers"] == ["session_archive", "skills"]
    assert run("config", "validate").exit_code == 0


def test_installed_providers_are_offered_with_where_they_come_from(run, home, fake_dist):
    fake_dist("hermes-core-notes", "1.2", {"notes": "notes_mod"}, {"notes_mod": THIRD_PARTY})
    answers = ["anthropic", "", "-", "notes, session_archive", "none", "global"]
    result = run("setup", input="\n".join(answers) + "\n")
    assert result.exit_code == 0, result.output
    assert "notes  (installed: hermes-core-notes 1.2) - Notes kept by a third-party plugin." \
        in result.output
    assert "session_archive  (built-in)" in result.output
    assert written(home)["memory"]["providers"] == ["notes", "session_archive"]


def test_a_third_party_client_takes_its_own_key_variable_and_needs_a_model(run, home,
                                                                         dir_plugin):
    dir_plugin("echo_client", CLIENT)
    no_model = run("setup", "--yes", "--client", "echo", "--provider", "session_archive")
    assert no_model.exit_code == 2 and "Model (echo): no default; pass --model" in no_model.output
    answers = ["echo", "echo-1", "http://127.0.0.1:8080/v1", "MY_ECHO_KEY", "session_archive",
               "none", "global"]
    result = run("setup", input="\n".join(answers) + "\n")
    assert result.exit_code == 0, result.output
    assert "echo  (directory plugin echo_client) - Repeats the last user message." in result.output
    assert "The key is read from $MY_ECHO_KEY, which is NOT set" in result.output
    data = written(home)
    assert data["llm"] == {"client": "echo", "model": "echo-1"}
    assert data["echo"] == {"base_url": "http://127.0.0.1:8080/v1", "api_key_env": "MY_ECHO_KEY"}
    assert run("config", "validate").exit_code == 0
    check = run("setup", "--check")  # built through the registry, as a session builds it
    assert check.exit_code == 0, check.output
    assert "[ok  ] model: client echo, model echo-1, base URL http://127.0.0.1:8080/v1: answered" \
        in check.output


def test_unknown_names_in_flags_list_the_valid_ones(run, home):
    for flag, value, kind in [("--client", "nope", "model client"),
                              ("--provider", "nope", "memory provider"),
                              ("--embedder", "nope", "embedder")]:
        result = run("setup", "--yes", flag, value)
        assert result.exit_code == 2, result.output
        assert f"unknown {kind} 'nope'; valid: " in result.output
    assert "valid: anthropic" in run("setup", "--yes", "--client", "nope").output
    assert not (home / "config.yaml").exists()


def test_no_terminal_and_no_answer_names_the_flag(run, home):
    result = run("setup", input="")
    assert result.exit_code == 2
    assert "the input ended" in result.output and "pass --client" in result.output
    assert not (home / "config.yaml").exists()


def test_an_existing_config_is_diffed_kept_with_its_other_sections_and_backed_up(run, home):
    old = ("# my notes about this home\nhooks:\n  tool_timeout: 30  # slow tools\n"
           "memory:\n  providers: [session_archive]\n")
    (home / "config.yaml").write_text(old, encoding="utf-8")
    declined = run("setup", *FLAGS[2:], input="-\n\n")  # no --yes: asked (base URL, replace?)
    assert declined.exit_code == 0, declined.output
    assert "+  scope: user" in declined.output and "-  providers: [session_archive]" \
        in declined.output
    assert "Nothing written." in declined.output
    assert (home / "config.yaml").read_text() == old and not (home / "config.yaml.bak").exists()
    result = run(*FLAGS)
    assert result.exit_code == 0, result.output
    text = (home / "config.yaml").read_text()
    assert "# my notes about this home" in text and "tool_timeout: 30  # slow tools" in text
    assert (home / "config.yaml.bak").read_text() == old
    assert stat.S_IMODE((home / "config.yaml.bak").stat().st_mode) == 0o600


def test_the_diff_masks_a_stored_key(run, home):
    (home / "config.yaml").write_text("llm:\n  api_key: sk-ant-old-secret\n", encoding="utf-8")
    result = run(*FLAGS)
    assert result.exit_code == 0, result.output
    assert "sk-ant-old-secret" not in result.output and "api_key: **********" in result.output
    assert written(home)["llm"]["api_key"] == "sk-ant-old-secret"  # nothing stored is lost


def test_a_malformed_config_is_kept_unless_yes_then_backed_up(run, home):
    bad = "memory: [unclosed\n"
    (home / "config.yaml").write_text(bad, encoding="utf-8")
    refused = run("setup", input="anthropic\n")
    assert refused.exit_code == 1
    assert "malformed YAML" in refused.output and "hermes-core setup --yes" in refused.output
    assert (home / "config.yaml").read_text() == bad
    result = run(*FLAGS)
    assert result.exit_code == 0, result.output
    assert "malformed" in result.output
    assert (home / "config.yaml.bak").read_text() == bad
    assert written(home)["memory"]["scope"] == "user"


def test_store_key_writes_it_0600_and_says_so(run, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-stored")
    result = run(*FLAGS, "--store-key")
    assert result.exit_code == 0, result.output
    assert written(home)["llm"]["api_key"] == "sk-ant-stored"
    assert stat.S_IMODE((home / "config.yaml").stat().st_mode) == 0o600
    assert "The API key is stored in" in result.output and "mode 0600" in result.output
    assert "sk-ant-stored" not in result.output


def test_a_fixed_key_variable_cannot_be_renamed(run, home):
    result = run(*FLAGS, "--api-key-env", "MY_KEY")
    assert result.exit_code == 2
    assert "client 'anthropic' cannot take another variable (it reads ANTHROPIC_API_KEY only)" \
        in result.output
    assert not (home / "config.yaml").exists()


BROKEN = """
from hermes_core import MemoryProvider, hookimpl

class Broken(MemoryProvider):
    name = "broken"

    def __init__(self, *args, **kwargs):
        raise RuntimeError("cannot open its store")

@hookimpl
def register_memory_providers(register):
    register(Broken)
"""


def test_a_result_that_would_not_start_is_refused_before_asking(run, home, dir_plugin):
    dir_plugin("broken_provider", BROKEN)
    old = "memory:\n  scope: user\n"
    (home / "config.yaml").write_text(old, encoding="utf-8")
    result = run("setup", "--client", "anthropic", "--model", "m", "--base-url", "",
                 "--provider", "broken", "--embedder", "none", "--scope", "user", input="y\n")
    assert result.exit_code == 1
    assert "not valid" in result.output and "cannot open its store" in result.output
    assert "Replace config.yaml?" not in result.output  # refused before the question
    assert (home / "config.yaml").read_text() == old and not (home / "config.yaml.bak").exists()


def test_problems_the_file_already_had_do_not_block_and_are_named(run, home):
    old = "context:\n  engine: not-installed\n"
    (home / "config.yaml").write_text(old, encoding="utf-8")
    result = run(*FLAGS)
    assert result.exit_code == 0, result.output
    assert "left as it was: " in result.output and "not-installed" in result.output
    assert written(home)["context"] == {"engine": "not-installed"}
    assert (home / "config.yaml.bak").read_text() == old


def test_an_earlier_backup_is_not_overwritten(run, home):
    (home / "config.yaml.bak").write_text("memory:\n  scope: global\n", encoding="utf-8")
    (home / "config.yaml").write_text("memory:\n  scope: global\n# v2\n", encoding="utf-8")
    result = run(*FLAGS)
    assert result.exit_code == 0, result.output
    assert (home / "config.yaml.bak").read_text() == "memory:\n  scope: global\n"
    assert (home / "config.yaml.bak.1").read_text() == "memory:\n  scope: global\n# v2\n"
    assert "config.yaml.bak.1" in result.output


# ------------------------------------------------------------------------------ setup --check

def _closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _setup_against(run, base_url: str) -> None:
    result = run("setup", "--yes", "--client", "anthropic", "--model", "claude-test",
                 "--provider", "session_archive", "--embedder", "none", "--base-url", base_url)
    assert result.exit_code == 0, result.output


def test_check_answers_ok_through_the_loopback_messages_api(run, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with MessagesAPIServer(["OK"]) as api:
        url = api.base_url
        _setup_against(run, url)
        result = run("setup", "--check")
        assert result.exit_code == 0, result.output
        assert len(api.requests) == 1 and api.requests[0].body["model"] == "claude-test"
    assert f"[ok  ] model: client anthropic, model claude-test, base URL {url}: " \
        "answered in" in result.output
    assert "[ok  ] activation:" in result.output


def test_check_reports_a_dead_endpoint_clearly(run, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # held, never listening: nothing else can take the port
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        _setup_against(run, url)
        result = run("setup", "--check", "--timeout", "5", "--json")
    finally:
        sock.close()
    assert result.exit_code == 1
    model = json.loads(result.output)[0]
    assert model["ok"] is False and model["name"] == "model"
    assert f"client anthropic, model claude-test, base URL {url}" in model["detail"]
    assert "the endpoint does not answer (connection)" in model["detail"]
    assert "llm.base_url" in model["fix"]


def test_check_without_a_key_names_the_variable(run, home):
    _setup_against(run, f"http://127.0.0.1:{_closed_port()}")
    result = run("setup", "--check")
    assert result.exit_code == 1
    assert "no API key, so nothing was sent" in result.output
    assert "fix: export ANTHROPIC_API_KEY=..." in result.output


def test_check_names_a_refused_key_without_retrying(run, home, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    with MessagesAPIServer([Failure(401, "invalid x-api-key")] * 5) as api:
        _setup_against(run, api.base_url)
        result = run("setup", "--check")
        asked = len(api.requests)
    assert result.exit_code == 1
    assert "the key was refused (HTTP 401)" in result.output
    assert "fix: check the key in ANTHROPIC_API_KEY" in result.output
    assert asked == 1  # a wrong key is not retried


def test_json_lists_what_can_be_chosen(run, home):
    result = run("setup", "--json")
    assert result.exit_code == 0, result.output
    offer = json.loads(result.output)
    assert offer["clients"][0]["name"] == "anthropic"
    assert {"name": "file_memory", "origin": "built-in"}.items() <= next(
        p for p in offer["providers"] if p["name"] == "file_memory").items()
    assert [e["name"] for e in offer["embedders"]][:2] == ["auto", "none"]
    assert not (home / "config.yaml").exists()
