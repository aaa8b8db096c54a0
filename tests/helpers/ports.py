"""Free TCP ports on 127.0.0.1 for the servers the tests start."""

from __future__ import annotations

import socket

__all__ = ["free_ports"]


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct ports that were free on 127.0.0.1 a moment ago."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return tuple(sock.getsockname()[1] for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()
