"""The model clients' endpoints (llm.base_url, openai.base_url) must be http(s) URLs: a typo is
named when the config is read, not met as 'Connection error' at the first turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes_core import ConfigError
from hermes_core.config import parse_config_text


@pytest.mark.parametrize("bad", ["not a url", "localhost:8080", "ftp://example.com",
                                 "http://", "http://127.0.0.1:99999/v1"])
def test_llm_base_url_that_is_not_an_http_url_is_refused(home: Path, bad: str):
    with pytest.raises(ConfigError) as caught:
        parse_config_text(f"llm:\n  base_url: '{bad}'\n", home / "config.yaml")
    message = str(caught.value)
    assert "llm.base_url" in message and "line 2" in message, message
    assert "http://127.0.0.1:8080" in message, message


def test_good_and_empty_base_urls_are_kept(home: Path):
    path = home / "config.yaml"
    good = parse_config_text("llm:\n  base_url: https://gw.example/anthropic\n", path)
    assert good.core.llm.base_url == "https://gw.example/anthropic"
    assert parse_config_text("llm:\n  base_url: ''\n", path).core.llm.base_url is None


def test_the_environment_variable_is_named_when_it_is_the_bad_value(home: Path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "localhost:8080")
    with pytest.raises(ConfigError) as caught:
        parse_config_text("", home / "config.yaml")
    assert "ANTHROPIC_BASE_URL" in str(caught.value)


def test_config_set_refuses_a_bad_endpoint_and_keeps_the_file(run, home: Path):
    path = home / "config.yaml"
    path.write_text("llm:\n  model: m\n", encoding="utf-8")
    for key in ("llm.base_url", "openai.base_url"):
        result = run("config", "set", key, "localhost:11434/v1")
        assert result.exit_code == 1, (key, result.output)
        assert key in result.output and "http" in result.output, result.output
    assert path.read_text(encoding="utf-8") == "llm:\n  model: m\n"
    assert run("config", "set", "openai.base_url", "http://127.0.0.1:11434/v1").exit_code == 0


def test_a_password_in_a_refused_endpoint_is_not_printed(run, home: Path):
    result = run("config", "set", "llm.base_url", "ftp://me:hunter2secret@gw.example")
    assert result.exit_code == 1 and "hunter2secret" not in result.output, result.output


def test_webhook_outbound_url_must_be_an_http_url(run, home: Path):
    result = run("config", "set", "webhook.outbound_url", "hooks.example/in")
    assert result.exit_code == 1 and "webhook.outbound_url" in result.output, result.output
    assert "http" in result.output
    assert not (home / "config.yaml").exists()
    assert run("config", "set", "webhook.outbound_url", "https://hooks.example/in").exit_code == 0
    assert run("config", "set", "webhook.outbound_url", "''").exit_code == 0
