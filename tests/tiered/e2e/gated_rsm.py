"""A directory RSM whose segment reads can be held at a gate, loaded by the broker under test
as ``tests.tiered.e2e.gated_rsm:GatedDirectoryRemoteStorageManager`` (fault injection at the
plugin boundary).

While ``<dir>/hold-fetch`` exists, ``fetch_log_segment`` waits (up to ``HOLD_LIMIT_S``), so
a test can keep the broker's remote reader threads busy and see what a full queue does.
"""

from __future__ import annotations

import time
from typing import BinaryIO

from tierlog.storage.directory import DirectoryRemoteStorageManager
from tierlog.tiered.api import RemoteLogSegmentMetadata

HOLD_FILE = "hold-fetch"
HOLD_LIMIT_S = 30.0


class GatedDirectoryRemoteStorageManager(DirectoryRemoteStorageManager):
    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> BinaryIO:
        deadline = time.monotonic() + HOLD_LIMIT_S
        while (self.root / HOLD_FILE).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().fetch_log_segment(metadata, start_position, end_position)
