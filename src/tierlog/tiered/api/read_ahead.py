"""Optional storage capability: loading a segment's bytes before anyone asks for them."""

from __future__ import annotations

import abc
from collections.abc import Callable

from tierlog.tiered.api.remote_log_segment_metadata import RemoteLogSegmentMetadata
from tierlog.tiered.api.topic_id_partition import TopicIdPartition


class SupportsReadAhead(abc.ABC):
    """A ``RemoteStorageManager`` that can prefetch segment ranges into its own cache.

    A plugin declares the capability by inheriting this class; callers check it with
    ``isinstance`` and never probe for the methods. Without it, the broker's remote reader
    and the Spark source read on demand only.

    Contract:

    * ``read_ahead_bytes`` is the most one read stream loads ahead of its reader (a
      plugin may adapt each stream's window below it). 0 means prefetched bytes would not
      be kept, and callers should not warm at all.
    * ``read_ahead_window(tip)`` is how far the partition's latest stream loads ahead now
      (``read_ahead_bytes`` unless the plugin adapts it). A caller that knows which segment
      comes next continues that reach into it with ``warm``, so a reader crossing a segment
      boundary never finds the pipeline empty.
    * ``warm`` schedules loads and returns at once (it may load the segment's manifest in the
      calling thread). It returns the number of loads scheduled; ranges already cached or
      loading are skipped, so a caller may widen its window call by call without any byte
      being fetched twice. A window that starts at position 0 also prefetches the offset and
      time indexes. ``length`` None means the plugin's own window; ``length=0`` warms only the
      segment's metadata and indexes.
    * ``watch_window(listener)`` sets the one callable told ``listener(tip)`` when a
      partition's window grows while its reader waits inside a read, so a caller that
      continues the window does not have to wait for that read to end (None removes it).
      It is called in the plugin's thread, outside the plugin's locks, and must return at
      once. A plugin whose window never grows need not call it.
    * Warming is best effort: failures are the plugin's to log and count, and must never
      surface in a later read of the same range.
    * Thread-safety is as for ``RemoteStorageManager``.
    """

    @property
    @abc.abstractmethod
    def read_ahead_bytes(self) -> int:
        """Bytes one stream may load ahead of its reader; 0 when nothing would be kept."""

    def read_ahead_window(self, tip: TopicIdPartition) -> int:
        """Bytes the partition's latest read stream keeps ahead of its reader now."""
        return self.read_ahead_bytes

    def watch_window(self, listener: Callable[[TopicIdPartition], None] | None) -> None:
        """Tell ``listener`` of each window that grows from now on (None: stop telling)."""
        del listener

    @abc.abstractmethod
    def warm(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int = 0,
        length: int | None = None,
    ) -> int:
        """Prefetch ``[start_position, start_position + length)`` of a segment in the
        background; return how many loads were scheduled."""
