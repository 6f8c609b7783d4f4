"""Hypothesis model test of log compaction against a pure model of the appended records.

Random streams of batches of keyed updates and tombstones (in random codecs), with random
clock steps, rolls and cleanings, under random ``min.compaction.lag.ms``,
``delete.retention.ms``, dirty ratios, segment sizes and offset-map sizes (small maps force
several passes). After every cleaning:

* every record read from offset 0 is the appended record at that offset (offsets kept);
* the latest value of every key is there, at its original offset;
* a superseded record below the cleaner checkpoint is gone once its successor is too;
* a tombstone is gone only ``delete.retention.ms`` after a cleaning that kept it;
* no record newer than ``min.compaction.lag.ms`` at the cleaning was removed;
* reloading the log from disk reads the same records.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.log.cleaner_helpers import Row, keyed_batch, make_cleaner, read_rows
from tests.log.log_helpers import TOPIC_ID, TP, ManualClock
from tierlog.log import LogConfig, LogManager
from tierlog.log.cleaner.offset_map import ENTRY_SIZE
from tierlog.protocol.records import Compression

KEYS = [b"k%d" % i for i in range(6)]


@dataclass(frozen=True)
class Put:
    """One batch of updates (and tombstones), written with a codec."""

    items: list[tuple[bytes, bytes | None]]
    advance_ms: int
    codec: Compression


@dataclass(frozen=True)
class Roll:
    pass


@dataclass(frozen=True)
class Clean:
    advance_ms: int


puts = st.builds(
    Put,
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=30))),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, 2_000),
    st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP, Compression.ZSTD]),
)
ops = st.lists(
    st.one_of(puts, puts, puts, puts, st.just(Roll()), st.builds(Clean, st.integers(0, 20_000))),
    min_size=10,
    max_size=150,
)

configs = st.fixed_dictionaries(
    {
        "segment_bytes": st.integers(200, 3_000),
        "min_compaction_lag_ms": st.sampled_from([0, 0, 1_000, 10_000]),
        "delete_retention_ms": st.sampled_from([0, 1_000, 15_000]),
        "min_cleanable_dirty_ratio": st.sampled_from([0.0, 0.1, 0.5]),
        "index_interval_bytes": st.sampled_from([0, 100, 4096]),
    }
)


def _check_offsets(rows: list[Row], appended: dict[int, tuple[bytes, bytes | None, int]]) -> None:
    offsets = [r[0] for r in rows]
    assert offsets == sorted(set(offsets)), "offsets are unique and increasing"
    for offset, key, value, ts in rows:
        assert appended[offset] == (key, value, ts), f"record at {offset} changed"


@settings(
    max_examples=int(os.environ.get("TIERLOG_CLEANER_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=ops, cfg=configs, map_keys=st.integers(4, 40))
def test_cleaning_matches_the_model(ops: list[object], cfg: dict[str, int], map_keys: int) -> None:
    clock = ManualClock()
    config = LogConfig(cleanup_policy=("compact",), file_delete_delay_ms=0, **cfg)  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        mgr = LogManager([data_dir], config, clock=clock)
        mgr.load()
        plog = mgr.create_log(TP, TOPIC_ID, config)
        appended: dict[int, tuple[bytes, bytes | None, int]] = {}
        first_kept_after_clean: dict[int, int] = {}
        dedupe = int(map_keys * ENTRY_SIZE / 0.9) + ENTRY_SIZE
        service, worker = make_cleaner(mgr.logs_by_dir(), clock, dedupe_buffer_size=dedupe)
        try:
            for op in [*ops, Roll(), Clean(0)]:
                if isinstance(op, Put):
                    clock.advance(op.advance_ms)
                    batch = keyed_batch(list(op.items), ts=clock.now, compression=op.codec)
                    res = plog.append_as_leader(batch, 0)
                    for i, (key, value) in enumerate(op.items):
                        appended[res.base_offset + i] = (key, value, clock.now)
                elif isinstance(op, Roll):
                    plog.roll()
                elif isinstance(op, Clean):
                    clock.advance(op.advance_ms)
                    _clean_and_check(
                        plog, service, worker, clock.now, config, appended, first_kept_after_clean
                    )
            rows = read_rows(plog)
            mgr.shutdown()
            again = LogManager([data_dir], config, clock=clock)
            again.load()
            reloaded = again.get_log(TP)
            assert reloaded is not None
            assert read_rows(reloaded) == rows
            again.shutdown()
        finally:
            for part in mgr.all_logs():
                part.close(clean=False)


def _clean_and_check(
    plog: object,
    service: object,
    worker: object,
    now: int,
    config: LogConfig,
    appended: dict[int, tuple[bytes, bytes | None, int]],
    first_kept: dict[int, int],
) -> None:
    from tierlog.log import PartitionLog
    from tierlog.log.cleaner.cleaner import Cleaner
    from tierlog.log.cleaner.log_cleaner import LogCleaner

    assert isinstance(plog, PartitionLog)
    assert isinstance(service, LogCleaner)
    assert isinstance(worker, Cleaner)
    before = {r[0] for r in read_rows(plog)}
    for _ in range(200):
        if not service.clean_once(worker, now):
            break
    assert not service.uncleanable_partitions
    rows = read_rows(plog)
    _check_offsets(rows, appended)
    present = {r[0] for r in rows}
    assert present <= before, "cleaning never adds records"
    # the latest record of every key is kept unless it is an expired tombstone
    latest: dict[bytes, int] = {}
    for offset in sorted(appended):
        latest[appended[offset][0]] = offset
    for key, offset in latest.items():
        if appended[offset][1] is not None:
            assert offset in present, f"latest value of {key!r} at {offset} is gone"
    # tombstones go only delete.retention.ms after a cleaning that kept them
    for offset in before - present:
        key, value, ts = appended[offset]
        if value is None and latest[key] == offset:
            # several passes of one round run at the same time: with a retention of 0 the
            # pass after the one that reached a tombstone may remove it
            seen = first_kept.get(offset, now)
            assert now >= seen + config.delete_retention_ms, f"tombstone at {offset} too early"
        # nothing newer than min.compaction.lag.ms is touched
        assert ts <= now - config.min_compaction_lag_ms, f"record at {offset} was too new"
    for offset in present:
        if appended[offset][1] is None:
            first_kept.setdefault(offset, now)
    if before - present:
        removed = before - present
        event("cleaning removed records")
        if any(appended[o][1] is None and latest[appended[o][0]] == o for o in removed):
            event("cleaning removed a latest tombstone")
    # below the checkpoint, a record whose successor is also below it is gone
    checkpoint = service.checkpointed_offset(plog.tp)
    if checkpoint is not None:
        for offset in present:
            key = appended[offset][0]
            if offset < checkpoint and latest[key] != offset:
                later = [o for o in appended if o > offset and appended[o][0] == key]
                assert min(later) >= checkpoint, f"superseded record at {offset} survived"
