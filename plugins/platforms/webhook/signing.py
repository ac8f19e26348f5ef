"""The request signature: HMAC-SHA256 over the timestamp and the body, together.

A client sends two headers with every request::

    X-Hermes-Timestamp: 1735689600                      (Unix seconds, an integer)
    X-Hermes-Signature: sha256=<hex HMAC-SHA256 of b"<timestamp>." + body, keyed by the secret>

Signing the timestamp with the body means a captured request cannot be given a fresh timestamp,
and the server refuses timestamps more than ``max_skew_seconds`` from its clock, so a captured
request is useless after that window. Within the window, the server also refuses a signature it
has already accepted (:class:`ReplayGuard`), so a request is served at most once.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import deque

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "ReplayGuard",
    "SignatureError",
    "sign",
    "signed_headers",
    "verify",
]

TIMESTAMP_HEADER = "X-Hermes-Timestamp"
SIGNATURE_HEADER = "X-Hermes-Signature"
_PREFIX = "sha256="


class SignatureError(Exception):
    """A request's signature is missing, malformed, stale or wrong; the message says which."""


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The ``X-Hermes-Signature`` value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256)
    return _PREFIX + mac.hexdigest()


def signed_headers(secret: str, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    """The two headers a client sends with ``body`` (now, unless ``timestamp`` is given)."""
    ts = int(time.time()) if timestamp is None else int(timestamp)
    return {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: sign(secret, ts, body)}


def verify(secret: str, timestamp: str | None, signature: str | None, body: bytes, *,
           max_skew: float, now: float | None = None) -> int:
    """Check a request; return its timestamp or raise :class:`SignatureError` saying why not."""
    if not timestamp or not signature:
        missing = [h for h, v in ((TIMESTAMP_HEADER, timestamp), (SIGNATURE_HEADER, signature))
                   if not v]
        raise SignatureError(f"missing header {' and '.join(missing)}: sign every request "
                             "(see docs/platforms.md)")
    try:
        ts = int(timestamp)
    except ValueError:
        raise SignatureError(f"{TIMESTAMP_HEADER} must be Unix seconds (an integer), "
                             f"got {timestamp[:40]!r}") from None
    skew = (time.time() if now is None else now) - ts
    if abs(skew) > max_skew:
        when = f"{int(skew)} s old" if skew > 0 else f"{int(-skew)} s in the future"
        raise SignatureError(f"the request's timestamp is {when}; requests more than "
                             f"{int(max_skew)} s from the server's clock are refused (re-sign it "
                             "now; check the client's clock)")
    if not signature.startswith(_PREFIX):
        raise SignatureError(f"{SIGNATURE_HEADER} must look like 'sha256=<hex>'")
    if not hmac.compare_digest(sign(secret, ts, body), signature.strip()):
        raise SignatureError("the signature does not match: sign b'<timestamp>.' + the exact body "
                             "bytes with HMAC-SHA256 and the shared secret")
    return ts


class ReplayGuard:
    """Signatures accepted within the skew window; a second use of one is a replay.

    Entries leave in arrival order once older than twice the window (the timestamp check refuses
    such requests anyway), so each check costs O(1) amortised however busy the server is.
    """

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: dict[str, float] = {}
        self._order: deque[tuple[float, str]] = deque()
        self._lock = threading.Lock()

    def check(self, signature: str, now: float | None = None) -> None:
        """Record ``signature``; raise :class:`SignatureError` if it was seen in the window."""
        now = time.time() if now is None else now
        with self._lock:
            cutoff = now - 2 * self.window
            while self._order and self._order[0][0] < cutoff:
                _, old = self._order.popleft()
                if self._seen.get(old, now) < cutoff:
                    del self._seen[old]
            if signature in self._seen:
                raise SignatureError("this signed request was already received; a request is "
                                     "served once (sign a retry anew, with a new timestamp)")
            self._seen[signature] = now
            self._order.append((now, signature))
