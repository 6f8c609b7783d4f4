"""A RemoteLogManager whose tasks run only when a test says so, tiering a local log.

Several suites need the same start: an in-memory metadata topic, a manager with its
periodic tasks parked, leadership of the log, the first copy run, then local retention
down to the active segment so every sealed segment is remote only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.helpers.poll import wait_until
from tierlog.log import PartitionLog
from tierlog.tiered.api import RemoteStorageManager, TopicIdPartition
from tierlog.tiered.manager import RemoteLogManager, RemoteLogManagerConfig
from tierlog.tiered.metadata import InMemoryMetadataTopicIO, TopicBasedRemoteLogMetadataManager


def tier_everything(
    lg: PartitionLog, rsm: RemoteStorageManager, tip: TopicIdPartition, logs_root: Path
) -> RemoteLogManager:
    """Copy every sealed segment of ``lg`` with ``rsm`` and delete it locally."""
    rlmm = TopicBasedRemoteLogMetadataManager(InMemoryMetadataTopicIO())
    rlmm.configure(
        {
            "remote.log.metadata.consume.poll.interval.ms": "5",
            "remote.log.metadata.snapshot.enable": "false",
        }
    )
    rlm = RemoteLogManager(
        RemoteLogManagerConfig(task_interval_ms=3_600_000, initial_task_delay_ms=3_600_000),
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
