"""The auxiliary files shipped with each remote segment."""

from __future__ import annotations

import enum


class IndexType(enum.Enum):
    """Which index ``RemoteStorageManager.fetch_index`` returns.

    ``TRANSACTION`` may be absent for a segment (no aborted transactions); fetching it then
    raises ``RemoteResourceNotFoundException``.
    """

    OFFSET = 0
    TIMESTAMP = 1
    PRODUCER_SNAPSHOT = 2
    TRANSACTION = 3
    LEADER_EPOCH = 4
