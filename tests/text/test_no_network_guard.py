"""The `no_network` fixture really stops outbound connections (else it proves nothing)."""

from __future__ import annotations

import socket

import pytest

from tests.support.text import NetworkUsed


def test_guard_blocks_a_public_lookup(no_network: None) -> None:
    with pytest.raises(NetworkUsed):
        socket.getaddrinfo("openaipublic.blob.core.windows.net", 443)


def test_guard_blocks_a_public_connection(no_network: None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock, pytest.raises(NetworkUsed):
        sock.connect(("192.0.2.1", 443))


def test_guard_lets_loopback_through(no_network: None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=2):
            pass


def test_guard_blocks_a_public_datagram(no_network: None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, pytest.raises(NetworkUsed):
        sock.sendto(b"x", ("192.0.2.1", 53))
