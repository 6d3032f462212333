"""Choosing ``MASTER_PORT`` for a gang: a TCP port that is free on rank 0's node right now."""

from __future__ import annotations

import socket


def pick_free_port(host: str = "") -> int:
    """Return a TCP port the kernel reports free on ``host`` (all addresses by default).

    The kernel picks it from the ephemeral range by binding port 0; the socket is closed
    before returning, so a race with another program is possible but rare, unlike a fixed
    29500 that two gangs on one node would share.

    Args:
        host: the address to bind, ``""`` for all IPv4 addresses.

    Returns:
        A port number, 1024..65535.

    Raises:
        OSError: no socket could be bound.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]  # (host, port) for AF_INET
        return port
