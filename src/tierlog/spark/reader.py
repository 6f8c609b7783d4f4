"""Executor side: one planned slice in, Arrow RecordBatches out, offsets exactly [start, end).

Cold slices stream the segment from the planned byte position (or the offset index's) in
`READ_SIZE` steps, decoding whole batches as they complete. If the segment has vanished
since planning (retention deleted it), the rest of the slice is asked of the broker, which
either still has it or answers OFFSET_OUT_OF_RANGE; only then is the range lost, and
`failOnDataLoss` decides between an error naming the offsets and skipping them. The cursor
only moves past offsets already yielded, so a fallback never repeats or skips a record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from tierlog.protocol.errors import ErrorCode
from tierlog.spark.aborted import AbortedTxnFilter
from tierlog.spark.decode import decode_batches
from tierlog.spark.planning import Slice, position_for
from tierlog.spark.segments import offset_index, open_log, warm_segment
from tierlog.spark.wire import BrokerClient, BrokerError
from tierlog.tiered.api import RemoteResourceNotFoundException

log = logging.getLogger(__name__)

READ_SIZE = 4 << 20
FETCH_BYTES = 8 << 20


class DataLossError(RuntimeError):
    """Offsets that were planned can no longer be read (failOnDataLoss=true)."""


@dataclass(frozen=True)
class ReadContext:
    include_headers: bool
    fail_on_data_loss: bool
    bootstrap: str | None
    read_committed: bool = False


def _lost(ctx: ReadContext, s: Slice, start: int, end: int, why: str) -> None:
    topic, p = s.tp
    msg = (
        f"offsets [{start}, {end}) of {topic}-{p} are no longer available ({why}). "
        "Some data may have been lost because it is no longer available in the log or the "
        "remote tier (e.g. deleted by retention). If you want your query to continue when "
        "this happens, set the source option 'failOnDataLoss' to 'false'."
    )
    if ctx.fail_on_data_loss:
        raise DataLossError(msg)
    log.warning("%s Skipping them.", msg)


class _SliceReader:
    def __init__(self, s: Slice, ctx: ReadContext) -> None:
        self.s = s
        self.ctx = ctx
        self.cursor = s.start
        self.aborted = AbortedTxnFilter(s.aborted) if ctx.read_committed else None

    def _decode(self, data: bytes) -> tuple[pa.RecordBatch, int]:
        d = decode_batches(
            data,
            topic=self.s.tp[0],
            partition=self.s.tp[1],
            start=self.cursor,
            end=self.s.end,
            include_headers=self.ctx.include_headers,
            aborted=self.aborted,
        )
        self.cursor = max(self.cursor, d.next_offset)
        return d.batch, d.consumed

    def cold(self) -> Iterator[pa.RecordBatch]:
        seg = self.s.segment
        assert seg is not None
        pos = self.s.position
        if pos < 0:
            pos = position_for(offset_index(seg.ref, seg.first), self.s.start)
        with open_log(seg.ref, pos, self.s.end_position) as stream:
            pending = b""
            while self.cursor < self.s.end:
                chunk = stream.read(READ_SIZE)
                data = pending + chunk if pending else chunk
                batch, consumed = self._decode(data)
                if batch.num_rows:
                    yield batch
                pending = data[consumed:]
                if not chunk:
                    break
        if self.cursor < self.s.end:
            raise RemoteResourceNotFoundException(
                f"segment {seg.ref} ends before offset {self.s.end} (at {self.cursor})"
            )

    def broker(self) -> Iterator[pa.RecordBatch]:
        if self.ctx.bootstrap is None:
            _lost(self.ctx, self.s, self.cursor, self.s.end, "no broker to read them from")
            return
        with BrokerClient(self.ctx.bootstrap) as client:
            empty_fetches = 0
            while self.cursor < self.s.end:
                r = client.fetch(
                    self.s.tp,
                    self.cursor,
                    max_bytes=FETCH_BYTES,
                    read_committed=self.ctx.read_committed,
                )
                if self.aborted is not None:
                    self.aborted.add(r.aborted)
                if r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    ((earliest, _),) = client.list_offsets({self.s.tp: -2}).values()
                    if self.cursor >= earliest:
                        raise BrokerError(
                            f"offset {self.cursor} of {self.s.tp} out of range",
                            ErrorCode.OFFSET_OUT_OF_RANGE,
                        )
                    stop = min(earliest, self.s.end)
                    _lost(self.ctx, self.s, self.cursor, stop, f"log start offset is {earliest}")
                    self.cursor = stop
                    continue
                if r.error_code != 0:
                    raise BrokerError(f"Fetch {self.s.tp}: error {r.error_code}", r.error_code)
                before = self.cursor
                batch, _ = self._decode(r.records)
                if batch.num_rows:
                    yield batch
                if self.cursor == before:
                    if r.high_watermark <= self.cursor:
                        _lost(
                            self.ctx,
                            self.s,
                            self.cursor,
                            self.s.end,
                            f"high watermark is {r.high_watermark}",
                        )
                        return
                    empty_fetches += 1
                    if empty_fetches > 100:
                        raise BrokerError(f"no progress fetching {self.s.tp} at {before}", -1)
                else:
                    empty_fetches = 0


def warm(s: Slice) -> None:
    """Best effort: ask the storage plugin to start loading a cold slice's first bytes."""
    if s.segment is None:
        return
    try:
        warm_segment(s.segment.ref, max(s.position, 0))
    except Exception as exc:  # only an optimisation: the read itself reports real errors
        log.debug("warming %s failed: %s", s, exc)


def read_slice(s: Slice, ctx: ReadContext) -> Iterator[pa.RecordBatch]:
    reader = _SliceReader(s, ctx)
    if s.segment is None:
        yield from reader.broker()
        return
    try:
        yield from reader.cold()
    except (RemoteResourceNotFoundException, FileNotFoundError) as exc:
        log.warning("cold read of %s failed (%s); asking the broker from %d", s, exc, reader.cursor)
        yield from reader.broker()
