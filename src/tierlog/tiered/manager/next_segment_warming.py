"""Carrying a plugin's read-ahead across a segment boundary.

A ``SupportsReadAhead`` plugin's read-ahead stops at the end of the segment being read, so a
catching-up consumer would find the pipeline empty at the start of every segment and wait
object-store round trips there (manifest, indexes, first chunk). The reader knows which
segment comes next and continues the plugin's window into it: once a read ends within
``WARM_LEAD_WINDOWS`` windows of its segment's end, the next segment's manifest and indexes
are warmed (``length`` 0); once the window reaches past the end, each read asks for the part
of the next segment it now covers, so the bytes in flight stay one window across the
boundary instead of dropping to nothing and then doubling. What a read asks for is rounded
down to an eighth of the window (``_WARM_STEPS``): a consumer takes about 1 MiB per Fetch,
and a ``warm`` call per Fetch (a thread hand-off, a manifest lookup, a cache check per
chunk) cost ~0.1 CPU-s per GiB read cold, for chunks the previous call had mostly asked for.

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


class NextSegmentWarmer:
    """Warms the segment after the one a read ended in, each byte range once.

    Remembers, per segment read, how many bytes from the start of the next were asked for
    (bounded, oldest forgotten first); a failed ``warm`` is forgotten so a later read of
    the tail tries again. Best effort: nothing here fails or delays a read.
    """

    def __init__(self, rsm: SupportsReadAhead) -> None:
        self._rsm = rsm
        self._pool = ThreadPoolExecutor(_WARM_THREADS, thread_name_prefix="remote-log-warm")
        self._lock = threading.Lock()
        self._warmed: OrderedDict[uuid.UUID, int] = OrderedDict()

    def after_read(
        self,
        tip: TopicIdPartition,
        md: RemoteLogSegmentMetadata,
        end_position: int,
        next_segment: Callable[[], RemoteLogSegmentMetadata | None],
    ) -> None:
        """A read of ``md`` ended at ``end_position``: warm the part of the next segment
        (found by ``next_segment``, called only when needed) the window now covers."""
        window = self._rsm.read_ahead_window(tip)
        if window <= 0:
            return
        remaining = md.segment_size_in_bytes - end_position
        if remaining > WARM_LEAD_WINDOWS * window:
            return
        # bytes of the next segment inside the window that starts where this read ended
        step = max(1, window // _WARM_STEPS)
        wanted = max(0, window - remaining) // step * step
        key = md.remote_log_segment_id.id
        asked = self._ask(key, wanted)
        if asked is None:
            return
        try:
            nxt = next_segment()
            if nxt is None:
                return
            start = 0 if asked < 0 else asked
            self._pool.submit(self._warm, key, nxt, start, wanted - start, tip, md.end_offset)
        except Exception as e:
            log.debug("%s: warming the segment after offset %d failed: %r", tip, md.end_offset, e)

    def _ask(self, key: uuid.UUID, wanted: int) -> int | None:
        """Record that ``wanted`` bytes of the segment after segment ``key`` are asked for;
        the bytes asked before (-1 for none), or None when that already covers ``wanted``."""
        with self._lock:
            asked = self._warmed.get(key)
            if asked is not None and wanted <= asked:
                return None
            self._warmed[key] = wanted
            self._warmed.move_to_end(key)
            while len(self._warmed) > _WARMED_REMEMBERED:
                self._warmed.popitem(last=False)
        return -1 if asked is None else asked

    def _warm(
        self,
        key: uuid.UUID,
        nxt: RemoteLogSegmentMetadata,
        start: int,
        length: int,
        tip: TopicIdPartition,
        after: int,
    ) -> None:
        try:
            self._rsm.warm(nxt, start, length)
        except Exception as e:  # forget it, so a later read of the segment's tail tries again
            with self._lock:
                self._warmed.pop(key, None)
            log.debug("%s: warming the segment after offset %d failed: %r", tip, after, e)

    def close(self) -> None:
        """Stop warming: queued calls are dropped, running ones finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)
