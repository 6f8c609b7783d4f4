"""The files that make up one sealed local segment, handed to the storage plugin to copy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """Paths are local files owned by the log; the plugin reads them and must not modify or
    delete them. ``leader_epoch_index`` is the leader-epoch checkpoint text up to the next
    segment's base offset, already rendered as bytes (there is no file that holds exactly
    that slice). ``transaction_index`` is None when the segment has no aborted transactions.
    """

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes
