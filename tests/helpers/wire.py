"""Raw wire-protocol access for tests: typed requests through our codec, or arbitrary bytes."""

from __future__ import annotations

import socket
import struct

from tierlog.cli import WireClient

__all__ = ["WireClient", "connection_closed", "raw_connection"]


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
