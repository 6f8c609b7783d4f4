"""Kafka's classic consumer-group coordinator: ``GroupCoordinator`` plus its data types.

``state.py`` holds the whole state machine; ``coordinator.py`` is its asyncio driver;
``schema.py`` is the ``__consumer_offsets`` record format; ``store.py`` and
``log_store.py`` are where those records go.
"""

from tierlog.server.group.config import GroupCoordinatorConfig
from tierlog.server.group.coordinator import CoordinatorNode, GroupCoordinator
from tierlog.server.group.log_store import LogOffsetsStore
from tierlog.server.group.schema import OFFSETS_TOPIC, partition_for
from tierlog.server.group.state import GroupState
from tierlog.server.group.store import MemoryOffsetsStore, OffsetsStore, OffsetsStoreError

__all__ = [
    "OFFSETS_TOPIC",
    "CoordinatorNode",
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupState",
    "LogOffsetsStore",
    "MemoryOffsetsStore",
    "OffsetsStore",
    "OffsetsStoreError",
    "partition_for",
]
