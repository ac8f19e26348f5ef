"""The ``hindsight`` config section, validated by the kernel through the plugin's model."""

from __future__ import annotations

import pytest
from hermes_core_hindsight import HindsightConfig

from hermes_core.config import parse_config_text, redacted, validate_section
from hermes_core.errors import ConfigError


def section(home, text: str, monkeypatch=None) -> HindsightConfig:
    loaded = parse_config_text(text, home / "config.yaml")
    return validate_section(loaded, "hindsight", HindsightConfig, plugin="hindsight")


def test_defaults_work_against_a_local_server(hermes_home):
    cfg = section(hermes_home, "hindsight: {}\n")
    assert cfg.base_url == "http://127.0.0.1:8888" and cfg.bank == "hermes"
    assert cfg.api_key is None and cfg.recall_types == []


def test_trailing_slash_is_dropped(hermes_home):
    assert section(hermes_home, "hindsight:\n  base_url: https://mem.example:443/\n").base_url == (
        "https://mem.example:443")


@pytest.mark.parametrize("url, words", [
    ("localhost:8888", "not an http(s) URL"),
    ("http://127.0.0.1:8888/v1/default", "has a path"),
    ("ftp://host", "not an http(s) URL"),
])
def test_bad_base_url_says_how_to_write_it(hermes_home, url, words):
    with pytest.raises(ConfigError) as info:
        section(hermes_home, f"hindsight:\n  base_url: {url}\n")
    assert words in str(info.value) and "base_url" in str(info.value)


@pytest.mark.parametrize("text, words", [
    ("bank: 'my bank'", "bank 'my bank' is invalid"),
    ("recall_types: [world, world]", "lists a type twice"),
    ("recall_types: [opinion]", "recall_types"),
    ("recall_budget: huge", "recall_budget"),
    ("tags: ['a b']", "without spaces"),
    ("connect_timeout: 9\n  recall_timeout: 3", "lower connect_timeout"),
    ("retain_timout: 3", "retain_timout"),
])
def test_bad_values_are_named(hermes_home, text, words):
    with pytest.raises(ConfigError) as info:
        section(hermes_home, f"hindsight:\n  {text}\n")
    assert words in str(info.value)


def test_api_key_from_environment_is_secret(hermes_home, monkeypatch):
    monkeypatch.setenv("HINDSIGHT_API_KEY", "hs-very-secret")
    cfg = section(hermes_home, "hindsight: {}\n")
    assert cfg.bearer() == "hs-very-secret"
    assert "hs-very-secret" not in repr(cfg) and "hs-very-secret" not in cfg.model_dump_json()
    shown = redacted({"hindsight": {"api_key": "hs-very-secret"}})
    assert "hs-very-secret" not in str(shown)


def test_base_url_from_environment(hermes_home, monkeypatch):
    monkeypatch.setenv("HINDSIGHT_BASE_URL", "http://10.0.0.5:9999")
    assert section(hermes_home, "hindsight: {}\n").base_url == "http://10.0.0.5:9999"


def test_settings_no_longer_used_still_load_and_say_so() -> None:
    import warnings

    from hermes_core_hindsight.config import HindsightConfig

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = HindsightConfig(base_url="http://127.0.0.1:1", bank="b", max_queued_turns=5,
                                 shutdown_timeout=1)
    assert config.max_queued_turns == 5
    assert [str(w.message).split(" is ")[0] for w in caught] == [
        "hindsight.max_queued_turns", "hindsight.shutdown_timeout"]
    assert all(w.category is DeprecationWarning for w in caught)
