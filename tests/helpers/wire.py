"""Raw wire-protocol access for tests: arbitrary bytes on a socket (typed requests go through
``tierlog.client.WireConnection``)."""

from __future__ import annotations

import socket
import struct

__all__ = ["connection_closed", "frame", "raw_connection"]


def raw_connection(host_port: tuple[str, int], timeout_s: float = 10.0) -> socket.socket:
    return socket.create_connection(host_port, timeout=timeout_s)


def connection_closed(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """True if the peer closes the connection (EOF or reset) within the timeout."""
    sock.settimeout(timeout_s)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
