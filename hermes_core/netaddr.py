"""Addresses: whether a host to bind or call is this machine only."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


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
