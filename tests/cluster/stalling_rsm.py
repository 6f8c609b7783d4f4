"""A directory RSM whose segment copies can be stalled, loaded by the brokers under test as
``tests.cluster.stalling_rsm:StallingDirectoryRemoteStorageManager`` (fault injection at the
plugin boundary).

While ``<dir>/hold-copy-<broker id>`` exists, that broker's ``copy_log_segment_data`` waits
(up to ``HOLD_LIMIT_S``) before writing anything: COPY_SEGMENT_STARTED is published and the
copy is in flight, so killing the broker then leaves a dangling copy behind.
``<dir>/copying-<broker id>`` is created when a copy starts waiting, so a test knows it is.
"""

from __future__ import annotations

import time
from pathlib import Path

from tierlog.storage.directory import DirectoryRemoteStorageManager
from tierlog.tiered.api import CustomMetadata, LogSegmentData, RemoteLogSegmentMetadata

HOLD_LIMIT_S = 120.0


def hold_file(root: Path, broker_id: int) -> Path:
    return root / f"hold-copy-{broker_id}"


def copying_file(root: Path, broker_id: int) -> Path:
    return root / f"copying-{broker_id}"


class StallingDirectoryRemoteStorageManager(DirectoryRemoteStorageManager):
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment: LogSegmentData
    ) -> CustomMetadata | None:
        hold = hold_file(self.root, self.broker_id)
        if hold.exists():
            copying_file(self.root, self.broker_id).touch()
            deadline = time.monotonic() + HOLD_LIMIT_S
            while hold.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().copy_log_segment_data(metadata, segment)
