"""The RemoteLogManager (KIP-405 orchestration): copy, expiration and follower tasks, the
remote read path, the remote index cache and the tiered-storage quotas.

Server-facing API (all of it is safe to call from the asyncio loop unless marked blocking):

* ``RemoteLogManager(config, rsm, rlmm, log_dir, metrics=RemoteMetrics(registry))``,
  ``startup()``, ``close()`` (idempotent, prompt; closes the plugins);
* ``on_leadership_change(leaders, followers)`` with ``PartitionLog`` objects; logs whose
  ``remote_enabled`` is false are ignored;
* ``on_config_change(log)``: copy disabled / re-enabled, or tiering newly enabled;
* blocking (run in a thread): ``stop_partitions([StopPartition(log, delete_remote_log)])``
  for topic deletion, ``disable_remote(log)`` for ``remote.storage.enable=false``;
* ``await read_remote([RemoteFetchRequest(log, offset, max_bytes, min_one_message)],
  fetch_max_bytes) -> list[RemoteFetchResult]`` for Fetch offsets in
  ``[log_start_offset, local_log_start_offset)``;
* ``await offset_for_timestamp(log, ts)``, ``earliest_local_offset(log)`` (-4) and
  ``latest_tiered_offset(log)`` (-5) for ListOffsets.
"""

from tierlog.tiered.manager.config import RemoteLogManagerConfig
from tierlog.tiered.manager.manager import (
    RemoteFetchRequest,
    RemoteFetchResult,
    RemoteLogManager,
    StopPartition,
    earliest_local_offset,
    latest_tiered_offset,
)
from tierlog.tiered.manager.metrics import RemoteMetrics

__all__ = [
    "RemoteFetchRequest",
    "RemoteFetchResult",
    "RemoteLogManager",
    "RemoteLogManagerConfig",
    "RemoteMetrics",
    "StopPartition",
    "earliest_local_offset",
    "latest_tiered_offset",
]
