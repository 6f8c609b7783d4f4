"""FindCoordinator as Kafka's admin client uses it: a group's or a transactional id's
coordinator, asked of the bootstrap broker again while it is still being elected or loaded,
and a connection to it. ``consumer-groups`` and ``transactions`` share it."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tierlog.cli.common import CLIENT_ID
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

#: Answers that mean "ask again shortly" while a coordinator loads or moves.
RETRIABLE = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    }
)

#: FindCoordinator's key types.
GROUP, TRANSACTION = 0, 1


class CoordinatorNotFound(Exception):
    """FindCoordinator kept failing (or failed for good) until the deadline."""

    def __init__(self, code: int) -> None:
        super().__init__(error_name(code))
        self.code = code


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}  ({self.node_id})"


def error_name(code: int) -> str:
    """Kafka's name of an error code (the number itself for one tierlog does not know)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def find_coordinator(
    bootstrap: WireConnection,
    brokers: BrokerConnections,
    key: str,
    key_type: int,
    timeout_s: float,
) -> tuple[Node, WireConnection]:
    """The coordinator of ``key`` and a connection to it: one of ``brokers``' when the
    metadata named it, else a new one (which the caller closes with nothing: the process
    ends with the command)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = bootstrap.call(ApiKey.FIND_COORDINATOR, 3, key=key, key_type=key_type)
        code = int(r.error_code)
        if code == 0:
            break
        if code not in RETRIABLE or time.monotonic() > deadline:
            raise CoordinatorNotFound(code)
        time.sleep(0.1)
    node = Node(int(r.node_id), str(r.host), int(r.port))
    if brokers.knows(node.node_id):
        return node, brokers.to(node.node_id)
    return node, WireConnection(node.host, node.port, client_id=CLIENT_ID)
