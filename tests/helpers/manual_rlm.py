"""A RemoteLogManager whose tasks run only when a test says so, tiering a local log.

Several suites need the same start: a log of sealed segments of chosen sizes, an in-memory
metadata topic, a manager with its periodic tasks parked, leadership of the log, the first
copy run, then local retention down to the active segment so every sealed segment is
remote only.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.helpers.poll import wait_until
from tierlog.log import LogConfig, PartitionLog, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.tiered.api import RemoteStorageManager, TopicIdPartition
from tierlog.tiered.manager import RemoteLogManager, RemoteLogManagerConfig
from tierlog.tiered.metadata import InMemoryMetadataTopicIO, TopicBasedRemoteLogMetadataManager


def log_of_sealed_segments(
    logs_root: Path,
    tip: TopicIdPartition,
    segment_bytes: Sequence[int],
    value_bytes: int,
    seed: int,
) -> PartitionLog:
    """A tiered topic's log under ``logs_root`` whose sealed segments hold about
    ``segment_bytes`` bytes each, of one-record batches with random (incompressible) values
    of ``value_bytes``; one record, ``tail``, stays in the active segment."""
    lg = PartitionLog(
        TopicPartition(tip.topic, tip.partition),
        logs_root / f"{tip.topic}-{tip.partition}",
        LogConfig(index_interval_bytes=1, remote_storage_enable=True, retention_ms=-1),
        topic_id=tip.topic_id,
        remote_enabled=True,
    )
    rng = random.Random(seed)
    for size in segment_bytes:
        written = 0
        while written < size:
            batch = build_batch([SimpleRecord(rng.randbytes(value_bytes))])
            lg.append_as_leader(batch, leader_epoch=0, required_acks=1)
            written += len(batch)
        lg.roll()
    lg.append_as_leader(build_batch([SimpleRecord(b"tail")]), leader_epoch=0, required_acks=1)
    return lg


def tier_everything(
    lg: PartitionLog,
    rsm: RemoteStorageManager,
    tip: TopicIdPartition,
    logs_root: Path,
    **settings: Any,
) -> RemoteLogManager:
    """Copy every sealed segment of ``lg`` with ``rsm`` and delete it locally; ``settings``:
    more ``RemoteLogManagerConfig`` fields."""
    rlmm = TopicBasedRemoteLogMetadataManager(InMemoryMetadataTopicIO())
    rlmm.configure(
        {
            "remote.log.metadata.consume.poll.interval.ms": "5",
            "remote.log.metadata.snapshot.enable": "false",
        }
    )
    rlm = RemoteLogManager(
        RemoteLogManagerConfig(
            task_interval_ms=3_600_000, initial_task_delay_ms=3_600_000, **settings
        ),
        rsm,
        rlmm,
        logs_root,
    )
    rlm.startup()
    rlm.on_leadership_change([lg])
    wait_until(lambda: rlmm.is_ready(tip), what="remote metadata ready")
    rlm.run_now(lg.tp, "copy")
    lg.update_config(dataclasses.replace(lg.config, local_retention_bytes=1))
    lg.run_retention()
    return rlm
