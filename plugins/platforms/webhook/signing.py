"""Request signatures: the Standard Webhooks scheme (the default) and the older X-Hermes-* headers.

**Standard Webhooks** (https://www.standardwebhooks.com/, the default for new clients)::

    webhook-id: msg_2b0c...                              (unique per message)
    webhook-timestamp: 1735689600                        (Unix seconds, an integer)
    webhook-signature: v1,<base64 HMAC-SHA256 of b"<id>.<timestamp>." + body>

``webhook-signature`` may hold several space-separated entries (``v1,<a> v1,<b>``), so a sender
rotating its key can sign with the old and the new one at once; one matching ``v1`` entry is
enough, entries of other versions are ignored. A secret written ``whsec_<base64>`` is the base64 of
the key bytes (as the specification serialises secrets); any other secret is used as its UTF-8
bytes.

**X-Hermes-*** (kept working for existing clients)::

    X-Hermes-Timestamp: 1735689600
    X-Hermes-Signature: sha256=<hex HMAC-SHA256 of b"<timestamp>." + body>

Either way the timestamp is signed with the body, so a captured request cannot be given a fresh
timestamp, and a timestamp more than ``max_skew_seconds`` from the server's clock is refused.
Within that window :class:`ReplayGuard` refuses a request whose MAC it has already accepted. The
guard is keyed on the MAC the server computed itself, never on the header text, so re-spelling a
header (case, padding, extra bytes, another order of rotation signatures) cannot make a replay look
new; and header values that are not plain ASCII are refused outright (:class:`HeaderError`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "HERMES_HEADERS",
    "SIGNATURE_HEADER",
    "STANDARD_HEADERS",
    "TIMESTAMP_HEADER",
    "WEBHOOK_ID_HEADER",
    "WEBHOOK_SIGNATURE_HEADER",
    "WEBHOOK_TIMESTAMP_HEADER",
    "HeaderError",
    "ReplayGuard",
    "Scheme",
    "SignatureError",
    "Verified",
    "check_ascii",
    "check_headers_present",
    "sign",
    "sign_standard",
    "signed_headers",
    "signing_key",
    "verify",
    "verify_request",
    "verify_standard",
]

TIMESTAMP_HEADER = "X-Hermes-Timestamp"
SIGNATURE_HEADER = "X-Hermes-Signature"
WEBHOOK_ID_HEADER = "webhook-id"
WEBHOOK_TIMESTAMP_HEADER = "webhook-timestamp"
WEBHOOK_SIGNATURE_HEADER = "webhook-signature"
STANDARD_HEADERS = (WEBHOOK_ID_HEADER, WEBHOOK_TIMESTAMP_HEADER, WEBHOOK_SIGNATURE_HEADER)
HERMES_HEADERS = (TIMESTAMP_HEADER, SIGNATURE_HEADER)

Scheme = Literal["standard", "hermes"]

_PREFIX = "sha256="
_HERMES_SIGNATURE_RE = re.compile(r"sha256=[0-9a-fA-F]{64}")
_WHSEC = "whsec_"
#: a webhook-id is an opaque token; this bounds what is hashed and echoed in errors
_MAX_ID_CHARS = 256
_MAX_SIGNATURES = 16


class SignatureError(Exception):
    """A request's signature is missing, malformed, stale or wrong; the message says which."""


class HeaderError(SignatureError):
    """A signing header carries bytes outside printable ASCII (answered 400, not 401)."""


@dataclass(frozen=True)
class Verified:
    """A request that passed: its scheme, timestamp and the MAC the server computed for it."""

    scheme: Scheme
    timestamp: int
    mac: bytes


def signing_key(secret: str) -> bytes:
    """The HMAC key of ``secret``: ``whsec_<base64>`` decoded, any other secret as UTF-8."""
    if secret.startswith(_WHSEC):
        try:
            return base64.b64decode(secret[len(_WHSEC):], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a secret starting with 'whsec_' must continue with base64 "
                             "(the Standard Webhooks form of the key bytes)") from None
    return secret.encode("utf-8")


def check_ascii(name: str, value: str | None) -> None:
    """Raise :class:`HeaderError` unless ``value`` is printable ASCII (or absent)."""
    if value is None:
        return
    if not value.isascii() or not value.isprintable():
        bad = next((c for c in value if not (c.isascii() and c.isprintable())), "")
        raise HeaderError(f"header {name} contains the byte {ord(bad):#04x}; signing headers must "
                          "be plain printable ASCII (send the value exactly as it was computed)")


def _mac(secret: str, content: bytes) -> bytes:
    return hmac.new(signing_key(secret), content, hashlib.sha256).digest()


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The ``X-Hermes-Signature`` value for ``body`` sent at ``timestamp``."""
    return _PREFIX + _mac(secret, f"{timestamp}.".encode("ascii") + body).hex()


def sign_standard(secret: str, msg_id: str, timestamp: int | str, body: bytes) -> str:
    """One ``webhook-signature`` entry (``v1,<base64>``) for ``body`` with ``msg_id``/``timestamp``."""
    mac = _mac(secret, f"{msg_id}.{timestamp}.".encode() + body)
    return "v1," + base64.b64encode(mac).decode("ascii")


def signed_headers(secret: str, body: bytes, *, timestamp: int | None = None,
                   scheme: Scheme = "standard", msg_id: str | None = None) -> dict[str, str]:
    """The headers a client sends with ``body`` (now, unless ``timestamp`` is given)."""
    ts = int(time.time()) if timestamp is None else int(timestamp)
    if scheme == "hermes":
        return {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: sign(secret, ts, body)}
    mid = msg_id or "msg_" + secrets.token_hex(12)
    return {WEBHOOK_ID_HEADER: mid, WEBHOOK_TIMESTAMP_HEADER: str(ts),
            WEBHOOK_SIGNATURE_HEADER: sign_standard(secret, mid, ts, body)}


def _check_timestamp(name: str, timestamp: str, max_skew: float, now: float | None) -> int:
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise SignatureError(f"{name} must be Unix seconds (an integer), got {timestamp[:40]!r}")
    ts = int(timestamp)
    skew = (time.time() if now is None else now) - ts
    if abs(skew) > max_skew:
        when = f"{int(skew)} s old" if skew > 0 else f"{int(-skew)} s in the future"
        raise SignatureError(f"the request's timestamp is {when}; requests more than "
                             f"{int(max_skew)} s from the server's clock are refused (re-sign it "
                             "now; check the client's clock)")
    return ts


def _missing(pairs: tuple[tuple[str, str | None], ...]) -> None:
    missing = [name for name, value in pairs if not value]
    if missing:
        raise SignatureError(f"missing header {' and '.join(missing)}: sign every request "
                             "(see docs/platforms.md)")


def verify(secret: str, timestamp: str | None, signature: str | None, body: bytes, *,
           max_skew: float, now: float | None = None) -> Verified:
    """Check an X-Hermes-* request; return what passed or raise :class:`SignatureError`."""
    check_ascii(TIMESTAMP_HEADER, timestamp)
    check_ascii(SIGNATURE_HEADER, signature)
    _missing(((TIMESTAMP_HEADER, timestamp), (SIGNATURE_HEADER, signature)))
    assert timestamp is not None and signature is not None
    ts = _check_timestamp(TIMESTAMP_HEADER, timestamp, max_skew, now)
    if not _HERMES_SIGNATURE_RE.fullmatch(signature):
        raise SignatureError(f"{SIGNATURE_HEADER} must be exactly 'sha256=' and 64 hex digits")
    expected = _mac(secret, f"{ts}.".encode("ascii") + body)
    if not hmac.compare_digest(expected, bytes.fromhex(signature[len(_PREFIX):])):
        raise SignatureError("the signature does not match: sign b'<timestamp>.' + the exact body "
                             "bytes with HMAC-SHA256 and the shared secret")
    return Verified("hermes", ts, expected)


def verify_standard(secret: str, msg_id: str | None, timestamp: str | None,
                    signatures: str | None, body: bytes, *, max_skew: float,
                    now: float | None = None) -> Verified:
    """Check a Standard Webhooks request; return what passed or raise :class:`SignatureError`."""
    for name, value in zip(STANDARD_HEADERS, (msg_id, timestamp, signatures), strict=True):
        check_ascii(name, value)
    _missing(tuple(zip(STANDARD_HEADERS, (msg_id, timestamp, signatures), strict=True)))
    assert msg_id is not None and timestamp is not None and signatures is not None
    if len(msg_id) > _MAX_ID_CHARS:
        raise SignatureError(f"{WEBHOOK_ID_HEADER} must be at most {_MAX_ID_CHARS} characters")
    ts = _check_timestamp(WEBHOOK_TIMESTAMP_HEADER, timestamp, max_skew, now)
    entries = signatures.split(" ")
    if len(entries) > _MAX_SIGNATURES:
        raise SignatureError(f"{WEBHOOK_SIGNATURE_HEADER} holds {len(entries)} signatures; "
                             f"at most {_MAX_SIGNATURES} are read")
    expected = _mac(secret, f"{msg_id}.{ts}.".encode() + body)
    versions_seen = False
    for entry in entries:
        version, _, value = entry.partition(",")
        if version != "v1":
            continue
        versions_seen = True
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(expected, given):
            return Verified("standard", ts, expected)
    if not versions_seen:
        raise SignatureError(f"{WEBHOOK_SIGNATURE_HEADER} must hold 'v1,<base64>' entries "
                             "separated by spaces")
    raise SignatureError("no signature matches: sign b'<webhook-id>.<webhook-timestamp>.' + the "
                         "exact body bytes with HMAC-SHA256 and the shared secret (base64, 'v1,')")


def _scheme_of(headers: Mapping[str, str]) -> Scheme:
    """Standard Webhooks when the request has any ``webhook-*`` header, else X-Hermes-* when it
    has one of those; a request with neither is refused."""
    if any(headers.get(h) for h in STANDARD_HEADERS):
        return "standard"
    if any(headers.get(h) for h in HERMES_HEADERS):
        return "hermes"
    raise SignatureError(f"missing headers {', '.join(STANDARD_HEADERS)}: sign every request "
                         f"(Standard Webhooks; {TIMESTAMP_HEADER}/{SIGNATURE_HEADER} also "
                         "work; see docs/platforms.md)")


def verify_request(secret: str, headers: Mapping[str, str], body: bytes, *, max_skew: float,
                   now: float | None = None) -> Verified:
    """Check a request by whichever scheme its headers use (see :func:`_scheme_of`)."""
    get: Callable[[str], str | None] = headers.get
    if _scheme_of(headers) == "standard":
        return verify_standard(secret, get(WEBHOOK_ID_HEADER), get(WEBHOOK_TIMESTAMP_HEADER),
                               get(WEBHOOK_SIGNATURE_HEADER), body, max_skew=max_skew, now=now)
    return verify(secret, get(TIMESTAMP_HEADER), get(SIGNATURE_HEADER), body, max_skew=max_skew,
                  now=now)


def check_headers_present(headers: Mapping[str, str]) -> None:
    """The cheap check before a body is read: the signing headers are there and ASCII."""
    names = STANDARD_HEADERS if _scheme_of(headers) == "standard" else HERMES_HEADERS
    for name in names:
        check_ascii(name, headers.get(name))
    _missing(tuple((name, headers.get(name)) for name in names))


class ReplayGuard:
    """MACs accepted within the skew window; a second use of one is a replay.

    Keys are the MACs the server computed (:attr:`Verified.mac`), so two requests are the same
    exactly when they sign the same bytes. Entries leave in arrival order once older than twice the
    window (the timestamp check refuses such requests anyway), so each check costs O(1) amortised.
    """

    def __init__(self, window: float) -> None:
        self.window = window
        self._seen: dict[bytes | str, float] = {}
        self._order: deque[tuple[float, bytes | str]] = deque()
        self._lock = threading.Lock()

    def check(self, key: bytes | str, now: float | None = None) -> None:
        """Record ``key``; raise :class:`SignatureError` if it was seen in the window."""
        now = time.time() if now is None else now
        with self._lock:
            cutoff = now - 2 * self.window
            while self._order and self._order[0][0] < cutoff:
                _, old = self._order.popleft()
                if self._seen.get(old, now) < cutoff:
                    del self._seen[old]
            if key in self._seen:
                raise SignatureError("this signed request was already received; a request is "
                                     "served once (sign a retry anew, with a new timestamp)")
            self._seen[key] = now
            self._order.append((now, key))

    def forget(self, key: bytes | str) -> None:
        """Take ``key`` back (its request was not served after all: a retry may come)."""
        with self._lock:
            self._seen.pop(key, None)
