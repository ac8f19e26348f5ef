"""The webhook's signature scheme and replay guard, as pure functions (the server tests cover the
HTTP side: 401s that store nothing)."""

from __future__ import annotations

import pytest

from hermes_core.plugins.platforms.webhook.signing import ReplayGuard, SignatureError, sign, verify

SECRET = "a-long-enough-test-secret"


def test_signature_binds_timestamp_and_body():
    body = b'{"conversation_key": "k", "text": "hi"}'
    good = sign(SECRET, 1000, body)
    assert verify(SECRET, "1000", good, body, max_skew=300, now=1100).timestamp == 1000
    with pytest.raises(SignatureError, match="does not match"):
        verify(SECRET, "1001", good, body, max_skew=300, now=1100)  # timestamp swapped
    with pytest.raises(SignatureError, match="does not match"):
        verify(SECRET, "1000", good, body + b" ", max_skew=300, now=1100)
    with pytest.raises(SignatureError, match="is 401 s old"):
        verify(SECRET, "1000", good, body, max_skew=300, now=1401)
    with pytest.raises(SignatureError, match="missing header X-Hermes-Signature"):
        verify(SECRET, "1000", None, body, max_skew=300, now=1000)


def test_replay_guard_refuses_a_second_use_within_the_window_only():
    guard = ReplayGuard(window=300)
    guard.check("sig-a", now=1000)
    with pytest.raises(SignatureError, match="already received"):
        guard.check("sig-a", now=1200)
    guard.check("sig-b", now=1200)
    guard.check("sig-a", now=1000 + 601)  # forgotten after twice the window
    assert set(guard._seen) == {"sig-b", "sig-a"}


def test_replay_guard_stays_small_under_load():
    guard = ReplayGuard(window=1)
    for i in range(50_000):
        guard.check(f"sig-{i}", now=i * 0.01)
    assert len(guard._seen) <= 202  # two seconds of arrivals at 100/s
