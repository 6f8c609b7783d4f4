"""Carrying a plugin's read-ahead across segment boundaries.

A ``SupportsReadAhead`` plugin's read-ahead stops at the end of the segment being read, so a
catching-up consumer would find the pipeline empty at the start of every segment and wait
object-store round trips there (manifest, indexes, first chunk). The reader knows which
segments come next and continues the plugin's window into them: a segment whose start lies
within ``WARM_LEAD_WINDOWS`` windows of where a read ended has its manifest and indexes
warmed (``length`` 0), and the part of it the window covers is asked for, so the bytes in
flight stay one window ahead of the reader across every boundary.

The window may reach past more than one segment (a 128 MiB window over 64 MiB segments):
each segment it covers is asked for in turn. Asking only for the next one would leave the
one after it unrequested until the reader entered the next, and then ask for all of it at
once: a burst of GETs that share the store's bandwidth and land together, so the reader
waits for the first of them at every boundary.

What a read asks for is rounded down to an eighth of the window (``_WARM_STEPS``): a
consumer takes about 1 MiB per Fetch, and a ``warm`` call per Fetch (a thread hand-off, a
manifest lookup, a cache check per chunk) cost ~0.1 CPU-s per GiB read cold, for chunks the
previous call had mostly asked for.

A window can also grow while its reader waits inside a read (the plugin's first epoch,
decided at the reader's first wait): the plugin tells the warmer (``watch_window``), which
repeats the partition's last read end against the grown window, so the next segment's
chunks are asked for then rather than when that read ends, a GET later.

``warm`` starts with a manifest GET, a round trip the read that triggered it must not wait
for, so the calls run on a small pool owned here and shut down by ``close``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from tierlog.tiered.api import RemoteLogSegmentMetadata, SupportsReadAhead, TopicIdPartition

__all__ = ["WARM_LEAD_WINDOWS", "NextSegmentWarmer"]

log = logging.getLogger(__name__)

#: The next segment's manifest and indexes are warmed once a read ends within this many
#: read-ahead windows of its segment's end. A window is what the reader consumes per
#: object-store round trip when the store is the limit, so this leaves about two round trips
#: (manifest, then indexes) before the window reaches the boundary.
WARM_LEAD_WINDOWS = 3

_WARM_THREADS = 4
#: A read's ask is rounded down to a multiple of the window divided by this.
_WARM_STEPS = 8
_WARMED_REMEMBERED = 4096
#: Segments past the one read that one read looks at, at most (a window over many small
#: segments would otherwise make every Fetch walk all of them).
_MAX_SEGMENTS_AHEAD = 16


#: Where a partition's last read ended: its segment, the position, and how to find the
#: segment after a segment.
_ReadEnd = tuple[
    RemoteLogSegmentMetadata,
    int,
    Callable[[RemoteLogSegmentMetadata], RemoteLogSegmentMetadata | None],
]


K = TypeVar("K")
V = TypeVar("V")


def _keep(kept: OrderedDict[K, V], key: K, value: V) -> None:
    """``kept[key] = value`` as its newest entry, the oldest dropped past
    ``_WARMED_REMEMBERED``."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > _WARMED_REMEMBERED:
        kept.popitem(last=False)


class NextSegmentWarmer:
    """Warms the segments after the one a read ended in, each byte range once.

    Remembers, per segment warmed, how many bytes from its start were asked for, and which
    segment follows each segment read (both bounded, oldest forgotten first); a failed
    ``warm`` is forgotten so a later read tries again. Best effort: nothing here fails or
    delays a read.
    """

    def __init__(self, rsm: SupportsReadAhead) -> None:
        self._rsm = rsm
        self._pool = ThreadPoolExecutor(_WARM_THREADS, thread_name_prefix="remote-log-warm")
        self._lock = threading.Lock()
        self._warmed: OrderedDict[uuid.UUID, int] = OrderedDict()
        self._after: OrderedDict[uuid.UUID, RemoteLogSegmentMetadata] = OrderedDict()
        # each partition's last read end, repeated when its window grows
        self._last: OrderedDict[TopicIdPartition, _ReadEnd] = OrderedDict()
        rsm.watch_window(self._window_grown)

    def after_read(
        self,
        tip: TopicIdPartition,
        md: RemoteLogSegmentMetadata,
        end_position: int,
        segment_after: Callable[[RemoteLogSegmentMetadata], RemoteLogSegmentMetadata | None],
    ) -> None:
        """A read of ``md`` ended at ``end_position``: warm the part of each following
        segment (``segment_after`` gives the one after a segment, asked only when needed)
        the window now covers, and the manifests and indexes of those within the lead."""
        end = (md, end_position, segment_after)
        with self._lock:
            _keep(self._last, tip, end)
        self._continue(tip, end)

    def _window_grown(self, tip: TopicIdPartition) -> None:
        """The plugin's word that ``tip``'s window grew: continue it from the partition's
        last read end, on the pool (the plugin's reader thread must not wait for a manifest
        lookup)."""
        with self._lock:
            last = self._last.get(tip)
        if last is None:
            return
        try:
            self._pool.submit(self._continue, tip, last)
        except RuntimeError:  # closed
            pass

    def _continue(self, tip: TopicIdPartition, end: _ReadEnd) -> None:
        md, end_position, segment_after = end
        window = self._rsm.read_ahead_window(tip)
        if window <= 0:
            return
        lead = WARM_LEAD_WINDOWS * window
        distance = md.segment_size_in_bytes - end_position  # to the next segment's start
        if distance > lead:
            return
        step = max(1, window // _WARM_STEPS)
        current = md
        try:
            for _ in range(_MAX_SEGMENTS_AHEAD):
                target = self._next(current, segment_after)
                if target is None:
                    return
                size = target.segment_size_in_bytes
                # bytes of ``target`` inside the window that starts where this read ended
                wanted = min(size, max(0, window - distance) // step * step)
                key = target.remote_log_segment_id.id
                asked = self._ask(key, wanted)
                if asked is not None:
                    start = 0 if asked < 0 else asked
                    self._pool.submit(self._warm, current, target, start, wanted - start, tip)
                distance += size
                if distance > lead:
                    return
                current = target
        except Exception as e:
            log.debug("%s: warming the segments after offset %d failed: %r", tip, md.end_offset, e)

    def _next(
        self,
        md: RemoteLogSegmentMetadata,
        segment_after: Callable[[RemoteLogSegmentMetadata], RemoteLogSegmentMetadata | None],
    ) -> RemoteLogSegmentMetadata | None:
        """The segment after ``md``, remembered once found (a Fetch near a boundary asks
        for it again and again); None is not remembered, as the next may yet be copied."""
        key = md.remote_log_segment_id.id
        with self._lock:
            nxt = self._after.get(key)
        if nxt is not None:
            return nxt
        nxt = segment_after(md)
        if nxt is not None:
            with self._lock:
                _keep(self._after, key, nxt)
        return nxt

    def _ask(self, key: uuid.UUID, wanted: int) -> int | None:
        """Record that ``wanted`` bytes of segment ``key`` are asked for; the bytes asked
        before (-1 for none), or None when that already covers ``wanted``."""
        with self._lock:
            asked = self._warmed.get(key)
            if asked is not None and wanted <= asked:
                return None
            _keep(self._warmed, key, wanted)
        return -1 if asked is None else asked

    def _warm(
        self,
        before: RemoteLogSegmentMetadata,
        target: RemoteLogSegmentMetadata,
        start: int,
        length: int,
        tip: TopicIdPartition,
    ) -> None:
        try:
            self._rsm.warm(target, start, length)
        except Exception as e:  # forget it, so a later read of the segment before retries
            with self._lock:
                self._warmed.pop(target.remote_log_segment_id.id, None)
                self._after.pop(before.remote_log_segment_id.id, None)
            log.debug(
                "%s: warming the segment after offset %d failed: %r", tip, before.end_offset, e
            )

    def close(self) -> None:
        """Stop warming: queued calls are dropped, running ones finish on their own."""
        self._rsm.watch_window(None)
        self._pool.shutdown(wait=False, cancel_futures=True)
