"""The ``honcho`` config section: defaults, the environment, and clear errors for bad values."""

from __future__ import annotations

from typing import Any

import pytest
from hermes_core_honcho import HonchoConfig, HonchoProvider
from hermes_core_honcho.chunking import CONTINUED, split_message
from hermes_core_honcho.config import session_id_for

from hermes_core.config import redacted
from hermes_core.errors import ConfigError
from hermes_core.testing import make_instance


def build(home: Any, section: str) -> Any:
    return make_instance(HonchoProvider, "memory-provider", home, config=f"honcho:\n{section}")


def test_cloud_without_a_key_names_the_key_and_the_variable(hermes_home: Any) -> None:
    with pytest.raises(ConfigError) as info:
        build(hermes_home, "  workspace: mine\n")
    message = str(info.value)
    assert "HONCHO_API_KEY" in message and "honcho.api_key" in message and "line" in message


def test_key_from_the_environment_is_secret(hermes_home: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("HONCHO_API_KEY", "hch-v3-secret")
    provider = build(hermes_home, "  workspace: mine\n")
    try:
        assert provider.config.api_key_value() == "hch-v3-secret"
        assert "hch-v3-secret" not in repr(provider.config)
        assert redacted({"api_key": "hch-v3-secret"}) == {"api_key": "**********"}
        assert provider.client._http.headers["Authorization"] == "Bearer hch-v3-secret"
    finally:
        provider.shutdown()


@pytest.mark.parametrize(("section", "expected"), [
    ("  base_url: http://127.0.0.1:1\n  workspace: my space\n",
     "honcho.workspace 'my space' is not a valid Honcho id"),
    ("  base_url: http://127.0.0.1:1\n  user_peer: a/b\n", "honcho.user_peer"),
    ("  base_url: http://127.0.0.1:1\n  user_peer: same\n  ai_peer: same\n", "different ids"),
    ("  base_url: ftp://example\n", "not an http(s) URL"),
    ("  base_url: http://127.0.0.1:1\n  recall_mode: sometimes\n", "recall_mode"),
    ("  base_url: http://127.0.0.1:1\n  timeout: 0\n", "timeout"),
    ("  base_url: http://127.0.0.1:1\n  api_keys: x\n", "unknown key 'honcho.api_keys'"),
])
def test_bad_values_are_clear_errors(hermes_home: Any, section: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        build(hermes_home, section)


def test_self_hosted_needs_no_key_and_v3_is_dropped() -> None:
    config = HonchoConfig(base_url="http://127.0.0.1:8000/v3/")
    assert config.base_url == "http://127.0.0.1:8000" and config.api_key is None


def test_session_ids() -> None:
    assert session_id_for("20250301_142233_a1b2c3") == "20250301_142233_a1b2c3"
    odd = session_id_for("telegram:chat/42")
    assert odd.startswith("telegram-chat-42-") and odd != session_id_for("telegram:chat-42")
    assert len(session_id_for("x" * 300)) <= 100
    assert session_id_for("abc", "bot1-") == "bot1-abc"


def test_split_message_boundaries() -> None:
    assert split_message("short", 100) == ["short"]
    paragraphs = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(6))
    pieces = split_message(paragraphs, 400)
    assert all(len(p) <= 400 for p in pieces)
    assert pieces[0].endswith("word") and pieces[1].startswith(CONTINUED + "Paragraph")
    sentences = " ".join(f"Sentence number {i} ends here." for i in range(40))
    assert all(p.rstrip().endswith(".") for p in split_message(sentences, 200)[:-1])
    words = "alpha " * 200
    assert all(not p.removeprefix(CONTINUED).startswith("lpha") for p in split_message(words, 150))
    giant = "x" * 1000  # one word longer than the limit: cut mid-word, nothing lost
    joined = "".join(p.removeprefix(CONTINUED) for p in split_message(giant, 300))
    assert joined == giant
    text = "Un café à Lisboa. 東京で会いましょう。 " * 50
    assert "".join(p.removeprefix(CONTINUED) for p in split_message(text, 120)).replace(" ", "") == \
        text.replace(" ", "")


def test_a_setting_no_longer_used_still_loads_and_says_so() -> None:
    import warnings

    from hermes_core_honcho.config import HonchoConfig

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = HonchoConfig(base_url="http://127.0.0.1:1", workspace="w", shutdown_timeout=1)
        HonchoConfig(base_url="http://127.0.0.1:1", workspace="w")
    assert config.shutdown_timeout == 1
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "honcho.shutdown_timeout is no longer used" in str(caught[0].message)
    assert "remove it from config.yaml" in str(caught[0].message)
