"""Glue between the broker and the RemoteLogManager.

``TieredReadHooks`` implements the ``BrokerState.remote_reader`` interface the Fetch and
ListOffsets handlers already call (one partition at a time). The handler can get every
remote partition of a request read concurrently by collecting them and awaiting
``RemoteLogManager.read_remote`` once instead; this adapter serves the per-partition hook.

``build_remote_log_manager`` loads the two plugins from the broker config (short aliases or
``module:Class``) and builds the manager; the broker still binds the topic-based RLMM to
``__remote_log_metadata`` and reports leadership, config changes and topic deletions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.tiered.api.plugin import (
    RLMM_PROPS_PREFIX,
    RSM_ALIASES,
    RSM_PROPS_PREFIX,
    load_remote_log_metadata_manager,
    load_remote_storage_manager,
)
from tierlog.tiered.manager.config import RemoteLogManagerConfig
from tierlog.tiered.manager.manager import RemoteFetchRequest, RemoteLogManager
from tierlog.tiered.manager.metrics import RemoteMetrics

__all__ = ["RemoteFetchData", "TieredReadHooks", "build_remote_log_manager"]


@dataclass(frozen=True)
class RemoteFetchData:
    """Shaped like the log's ``FetchData`` so the Fetch handler treats both alike."""

    chunks: list[bytes | memoryview]
    size: int
    aborted_transactions: list[tuple[int, int]] | None = field(default=None)


class TieredReadHooks:
    def __init__(
        self, rlm: RemoteLogManager, get_log: Callable[[str, int], PartitionLog | None]
    ) -> None:
        self.rlm = rlm
        self._get_log = get_log

    async def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int,
        min_one_message: bool,
        upper_bound: str,
    ) -> RemoteFetchData:
        """Raises ``KafkaError`` with the partition's error code (e.g. OFFSET_OUT_OF_RANGE or
        UNKNOWN_SERVER_ERROR for a full reader queue); an empty result means fetch again."""
        lg = self._get_log(topic, partition)
        if lg is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        req = RemoteFetchRequest(lg, offset, max_bytes, min_one_message, upper_bound == "lso")
        (res,) = await self.rlm.read_remote([req], max(max_bytes, 0))
        if res.error is not ErrorCode.NONE:
            raise KafkaError(res.error, res.error_message)
        aborted = None
        if res.aborted_transactions is not None:
            aborted = [(t.producer_id, t.first_offset) for t in res.aborted_transactions]
        chunks: list[bytes | memoryview] = [res.records] if res.records else []
        return RemoteFetchData(chunks, len(res.records), aborted)

    async def offset_for_timestamp(
        self, topic: str, partition: int, timestamp: int
    ) -> tuple[int, int, int | None] | None:
        lg = self._get_log(topic, partition)
        if lg is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return await self.rlm.offset_for_timestamp(lg, timestamp)


def build_remote_log_manager(
    broker_values: Mapping[str, Any],
    rsm_props: Mapping[str, str],
    rlmm_props: Mapping[str, str],
    log_dir: Path,
    *,
    rlmm_aliases: Mapping[str, str],
    metrics: RemoteMetrics | None = None,
) -> RemoteLogManager:
    """Load and configure both plugins and build the (not yet started) manager.

    ``rsm_props`` / ``rlmm_props`` are the prefix-stripped plugin properties; ``broker.id``
    is added to both and ``log.dir`` to the RLMM's, as Kafka does.
    """

    class _Values:
        values = broker_values

    cfg = RemoteLogManagerConfig.from_broker_config(_Values())
    common = {"broker.id": str(cfg.broker_id)}
    rsm = load_remote_storage_manager(
        str(broker_values.get("remote.log.storage.manager.class.name") or "directory"),
        RSM_ALIASES,
        {RSM_PROPS_PREFIX + k: v for k, v in {**common, **rsm_props}.items()},
    )
    rlmm_all = {**common, "log.dir": str(log_dir), **rlmm_props}
    rlmm = load_remote_log_metadata_manager(
        str(broker_values.get("remote.log.metadata.manager.class.name") or "topic"),
        rlmm_aliases,
        {RLMM_PROPS_PREFIX + k: v for k, v in rlmm_all.items()},
    )
    return RemoteLogManager(cfg, rsm, rlmm, log_dir, metrics=metrics)
