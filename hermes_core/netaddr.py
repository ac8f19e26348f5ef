"""Addresses: whether a host to bind or call is this machine only; whether an endpoint is an
http(s) URL."""

from __future__ import annotations

import ipaddress

__all__ = ["http_url_problem", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP address) reaches only this machine.

    ``localhost`` is compared without case (``LOCALHOST``);
    an IPv6 address may be bracketed (``[::1]``), and an IPv4 address mapped into IPv6
    (``::ffff:127.0.0.1``) counts as the IPv4 address it maps. Anything else that is not an IP
    address, including the legacy shorthand ``127.1``, is not taken for loopback.
    """
    name = host.lower()
    if name == "localhost":
        return True
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


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
