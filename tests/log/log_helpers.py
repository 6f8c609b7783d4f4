"""Helpers shared by the log-engine tests (imported by basename, like other test dirs)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from tierlog.log import LogConfig, LogManager, PartitionLog, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch

TP = TopicPartition("orders", 0)
TOPIC_ID = uuid.UUID("9f1c3b1e-2d4a-4c8e-9a47-5b1d0e6f7a21")


class ManualClock:
    """Wall time the test moves explicitly, so time-based rules are exact."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


ManagerFactory = Callable[..., LogManager]


def new_log(mgr: LogManager, config: LogConfig | None = None) -> PartitionLog:
    return mgr.create_log(TP, TOPIC_ID, config)


def batch(
    n: int = 1,
    *,
    ts: int = 1_700_000_000_000,
    value_size: int = 10,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    tag: int = 0,
    transactional: bool = False,
) -> bytes:
    recs = [SimpleRecord(bytes([65 + (tag + i) % 26]) * value_size, b"k%d" % i) for i in range(n)]
    return build_batch(
        recs,
        timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )
