"""hermes_core.netaddr.is_loopback: which spellings of a host reach this machine only."""

from __future__ import annotations

import socket

import pytest

from hermes_core.netaddr import is_loopback

LOOPBACK = ["localhost", "LOCALHOST", "LocalHost", "127.0.0.1", "127.5.6.7",
            "::1", "[::1]", "::ffff:127.0.0.1", "::FFFF:127.0.0.1"]
NOT_LOOPBACK = ["0.0.0.0", "::", "0", "", "192.168.1.10", "::ffff:10.0.0.1", "example.com",
                "localhost.example.com", "localhost.", "127.1", "0x7f000001", "[127.0.0.1", "127.0.0.1 "]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_spellings_are_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", NOT_LOOPBACK)
def test_other_hosts_are_not(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("host", ["LOCALHOST", "127.0.0.1"])
def test_a_host_taken_for_loopback_binds_a_loopback_address(host: str) -> None:
    # what the claim protects: a server bound to the name listens on loopback only
    family, kind, proto, _, address = socket.getaddrinfo(host, 0, socket.AF_INET,
                                                         socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as sock:
        sock.bind(address)
        assert sock.getsockname()[0].startswith("127.")
