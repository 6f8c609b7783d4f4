"""Where a group's coordinator is, when it may be another broker (cluster mode)."""

from __future__ import annotations

from typing import Protocol

from tierlog.server.group.model import CoordinatorEntry


class CoordinatorPlacement(Protocol):
    """Which broker coordinates the groups of one ``__consumer_offsets`` partition, as
    FindCoordinator answers it for ``key``."""

    async def coordinator_for(self, key: str, partition: int) -> CoordinatorEntry: ...
