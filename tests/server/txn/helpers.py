"""Shared fixtures for the transaction state machine tests: a producer-id allocator and the
driver's write step."""

from __future__ import annotations

from itertools import count

from tierlog.server.txn.state import Decision, TxnMetadata, write_succeeded


class Allocator:
    """Kafka's ProducerIdManager in miniature: ids handed out once, in order."""

    def __init__(self, first: int = 1000) -> None:
        self._next = count(first)
        self.handed_out: list[int] = []

    def __call__(self) -> int:
        pid = next(self._next)
        self.handed_out.append(pid)
        return pid


def applied(decision: Decision) -> TxnMetadata:
    """The metadata once the decision's write (if any) succeeded."""
    assert decision.current is not None
    if decision.write is None:
        return decision.current
    return write_succeeded(decision.current, decision.write)
