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


def test_standard_webhooks_signature_follows_the_specification():
    import base64
    import hashlib
    import hmac

    from hermes_core.plugins.platforms.webhook.signing import (
        HeaderError,
        sign_standard,
        signing_key,
        verify_request,
        verify_standard,
    )

    body = b'{"conversation_key": "k", "text": "hi"}'
    expected = base64.b64encode(hmac.new(SECRET.encode(), b"msg_1.1000." + body,
                                         hashlib.sha256).digest()).decode()
    assert sign_standard(SECRET, "msg_1", 1000, body) == "v1," + expected
    ok = verify_standard(SECRET, "msg_1", "1000", f"v1,bm90IGl0 v1,{expected}", body,
                         max_skew=300, now=1100)
    assert ok.scheme == "standard" and ok.timestamp == 1000
    with pytest.raises(SignatureError, match="no signature matches"):
        verify_standard(SECRET, "msg_2", "1000", "v1," + expected, body, max_skew=300, now=1100)
    with pytest.raises(SignatureError, match="'v1,<base64>'"):
        verify_standard(SECRET, "msg_1", "1000", "v2," + expected, body, max_skew=300, now=1100)
    with pytest.raises(HeaderError, match="0xa0"):
        verify_standard(SECRET, "msg_1", "1000", "v1," + expected + "\xa0", body, max_skew=300,
                        now=1100)
    # whsec_ secrets are the base64 of the key bytes
    whsec = "whsec_" + base64.b64encode(b"k" * 24).decode()
    assert signing_key(whsec) == b"k" * 24
    with pytest.raises(ValueError, match="base64"):
        signing_key("whsec_***")
    # the scheme is picked by the headers; the MAC (the replay key) is the same however spelled
    legacy = sign(SECRET, 1000, body)
    a = verify_request(SECRET, {"X-Hermes-Timestamp": "1000", "X-Hermes-Signature": legacy},
                       body, max_skew=300, now=1100)
    b = verify_request(SECRET, {"X-Hermes-Timestamp": "1000",
                                "X-Hermes-Signature": "sha256=" + legacy[7:].upper()},
                       body, max_skew=300, now=1100)
    assert a.scheme == "hermes" and a.mac == b.mac
    with pytest.raises(SignatureError, match="missing headers webhook-id"):
        verify_request(SECRET, {}, body, max_skew=300, now=1100)
