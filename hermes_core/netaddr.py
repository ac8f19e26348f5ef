"""Addresses: whether a host to bind or call is this machine only; whether an endpoint is an
http(s) URL."""

from __future__ import annotations

import ipaddress

__all__ = ["http_url_problem", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP address) reaches only this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_url_problem(value: str) -> str | None:
    """What keeps ``value`` from being an endpoint a client can call (an ``http://`` or
    ``https://`` URL with a host and a valid port), or None. The text never repeats ``value``
    (it may carry a password): config errors show the value themselves, redacted."""
    from urllib.parse import urlsplit

    parts = urlsplit(value.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return ("is not an http(s) URL with a host; write the endpoint like "
                "https://gateway.example/v1 or http://127.0.0.1:8080")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return ("has a port that is not a number from 0 to 65535; write the endpoint like "
                "http://127.0.0.1:8080")
    return None
