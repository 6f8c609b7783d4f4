"""Through the wire: a topic created with ``index.interval.bytes=1`` and
``segment.index.bytes=12*N`` rolls after exactly N single-record batches, like Kafka.

With those settings every batch after a segment's first adds one time-index entry (its
timestamp increases), and a time index of 12*N bytes is full at N-1 entries (Kafka keeps
the last slot for the roll), so the (N+1)-th batch starts a new segment. The files must
carry Kafka's names.
"""

from __future__ import annotations

from pathlib import Path

import confluent_kafka as ck
import pytest

from tests.clients.real_clients import create_topic, disk_batches, segment_batches
from tests.helpers.broker import BrokerProcess

N = 5
BATCHES = 3 * N + 1
BASE_TS = 1_700_000_000_000
TOPIC = "roll-n"


@pytest.fixture(scope="module")
def rolled(module_broker: BrokerProcess) -> Path:
    """The partition directory after BATCHES one-record batches with increasing timestamps."""
    create_topic(
        module_broker.bootstrap,
        TOPIC,
        configs={"index.interval.bytes": "1", "segment.index.bytes": str(12 * N)},
    )
    p = ck.Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 0})
    for i in range(BATCHES):
        # flushing each record makes it a batch of its own
        p.produce(TOPIC, value=b"r%d" % i, partition=0, timestamp=BASE_TS + i)
        assert p.flush(30) == 0
    return module_broker.log_dir / f"{TOPIC}-0"


def test_segment_rolls_after_exactly_n_batches(rolled: Path) -> None:
    bases = [0, N, 2 * N, 3 * N]
    names = {f.name for f in rolled.iterdir()}
    assert sorted(n for n in names if n.endswith(".log")) == [f"{b:020d}.log" for b in bases]
    assert {"00000000000000000000.log", f"0000000000000000000{N}.log"} <= names
    for base in bases:
        stem = f"{base:020d}"
        assert {f"{stem}.index", f"{stem}.timeindex"} <= names, sorted(names)

    batches = disk_batches(rolled)
    assert len(batches) == BATCHES
    assert all(b.record_count == 1 for b in batches)
    for base in bases[:-1]:
        seg = rolled / f"{base:020d}"
        in_segment = segment_batches(seg.parent / f"{seg.name}.log")
        assert [b.base_offset for b in in_segment] == list(range(base, base + N))
        # Kafka indexes every batch but a segment's first (bytesSinceLastIndexEntry starts
        # at 0), and a time index counts as full one entry early (the last slot is kept for
        # the roll, which adds nothing here since the max timestamp is already indexed):
        # N-1 entries each, and sealed indexes are trimmed to them.
        assert (seg.parent / f"{seg.name}.timeindex").stat().st_size == 12 * (N - 1)
        assert (seg.parent / f"{seg.name}.index").stat().st_size == 8 * (N - 1)


def test_time_index_lookup_across_rolled_segments(
    module_broker: BrokerProcess, rolled: Path
) -> None:
    """ListOffsets by timestamp finds the right offset in every rolled segment."""
    c = ck.Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "roll-ts"})
    try:
        for i in (0, N - 1, N, 2 * N + 2, BATCHES - 1):
            (tp,) = c.offsets_for_times([ck.TopicPartition(TOPIC, 0, BASE_TS + i)], 10)
            assert tp.offset == i, (i, tp)
    finally:
        c.close()
