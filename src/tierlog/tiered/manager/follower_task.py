"""The follower task of one followed partition (Kafka's ``RLMFollowerTask``).

A follower copies nothing and expires nothing; it only keeps the log's
``highest_offset_in_remote_storage`` up to date from the remote metadata, so that local
retention on the follower knows which of its segments the leader has tiered.
"""

from __future__ import annotations

from tierlog.log import PartitionLog
from tierlog.tiered.api import ReplicaNotAvailableException, TopicIdPartition
from tierlog.tiered.manager.lineage import find_highest_remote_offset
from tierlog.tiered.manager.scheduling import PeriodicTask
from tierlog.tiered.manager.task_context import TaskContext

__all__ = ["FollowerTask"]


class FollowerTask(PeriodicTask):
    def __init__(self, lg: PartitionLog, tip: TopicIdPartition, ctx: TaskContext) -> None:
        super().__init__(f"follow {lg.tp}")
        self.log = lg
        self.tip = tip
        self._ctx = ctx

    def execute(self) -> None:
        if self.is_cancelled() or not self._ctx.rlmm.is_ready(self.tip):
            return
        try:
            offset, _epoch = find_highest_remote_offset(
                self.log.leader_epoch_cache.entries(),
                self.log.log_end_offset,
                lambda e: self._ctx.rlmm.highest_offset_for_epoch(self.tip, e),
            )
        except ReplicaNotAvailableException:
            return
        self.log.update_highest_offset_in_remote_storage(offset)
