"""Time-to-ready of the topic-based RLMM after a restart: full replay vs snapshots.

Fills ``__remote_log_metadata`` with N remote segments (one COPY_SEGMENT_STARTED record and
one COPY_SEGMENT_FINISHED update each, spread over user partitions), then measures how long a
fresh manager takes until every user partition is ready:

* full replay (snapshots disabled, Kafka's behaviour);
* from snapshots covering everything;
* from snapshots plus a tail of 1% more segments written after them.

Target (issue 3): under 5 s with snapshots for 100,000 segments.

    .venv/bin/python bench/bench_rlmm_replay.py [--segments 100000] [--backend log|memory]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tierlog.log import LogConfig, LogManager, TopicPartition
from tierlog.protocol.records import SimpleRecord, build_batch
from tierlog.tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.tiered.metadata import (
    METADATA_TOPIC,
    InMemoryMetadataTopicIO,
    MetadataTopicIO,
    RemoteLogMetadataTopicPartitioner,
    TopicBasedRemoteLogMetadataManager,
    serialize,
)


def log_backend(root: Path) -> tuple[MetadataTopicIO, Callable[[], None]]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests/tiered/metadata"))
    from log_topic_io import LogManagerMetadataTopicIO

    logs = LogManager([root / "logs"], LogConfig())
    logs.load()
    return LogManagerMetadataTopicIO(logs), logs.shutdown


def records_for(
    tips: list[TopicIdPartition], first: int, count: int
) -> list[tuple[TopicIdPartition, bytes]]:
    out = []
    for i in range(first, first + count):
        tip = tips[i % len(tips)]
        n = i // len(tips)
        m = RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId.generate_new(tip),
            start_offset=n * 1000,
            end_offset=n * 1000 + 999,
            max_timestamp_ms=1_700_000_000_000 + n,
            broker_id=0,
            event_timestamp_ms=1_700_000_000_000 + n,
            segment_size_in_bytes=1 << 20,
            custom_metadata=None,
            state=RemoteLogSegmentState.COPY_SEGMENT_STARTED,
            segment_leader_epochs={n // 50: n * 1000},
        )
        u = RemoteLogSegmentMetadataUpdate(
            m.remote_log_segment_id,
            m.event_timestamp_ms + 1,
            None,
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
            0,
        )
        out += [(tip, serialize(m)), (tip, serialize(u))]
    return out


def fill(
    io: MetadataTopicIO,
    logs: LogManager | None,
    part: RemoteLogMetadataTopicPartitioner,
    recs: list[tuple[TopicIdPartition, bytes]],
) -> None:
    """Bulk-load: many records per batch, one flush (the manager appends one at a time)."""
    by_mp: dict[int, list[bytes]] = {}
    for tip, value in recs:
        by_mp.setdefault(part.metadata_partition(tip), []).append(value)
    for mp, values in by_mp.items():
        if logs is None:
            for v in values:
                io.append(mp, None, v)
            continue
        lg = logs.get_log(TopicPartition(METADATA_TOPIC, mp))
        assert lg is not None
        for i in range(0, len(values), 500):
            batch = build_batch([SimpleRecord(v) for v in values[i : i + 500]])
            lg.append_as_leader(batch, leader_epoch=0)
        lg.flush()


def time_to_ready(
    io: MetadataTopicIO, tips: list[TopicIdPartition], props: dict[str, str]
) -> tuple[float, TopicBasedRemoteLogMetadataManager]:
    t0 = time.perf_counter()
    rlmm = TopicBasedRemoteLogMetadataManager(io)
    rlmm.configure(props)
    rlmm.on_partition_leadership_changes(set(tips), set())
    while not all(rlmm.is_ready(t) for t in tips):
        time.sleep(0.005)
    return time.perf_counter() - t0, rlmm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--segments", type=int, default=100_000)
    ap.add_argument("--user-partitions", type=int, default=500)
    ap.add_argument("--metadata-partitions", type=int, default=50)
    ap.add_argument("--backend", choices=["log", "memory"], default="log")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-rlmm-"))
    try:
        logs: LogManager | None = None
        if args.backend == "log":
            io, shutdown = log_backend(root)
            logs = io._logs  # type: ignore[attr-defined]
        else:
            io, shutdown = InMemoryMetadataTopicIO(), lambda: None
        n_mp = args.metadata_partitions
        io.ensure_topic(n_mp, {})
        part = RemoteLogMetadataTopicPartitioner(n_mp)
        tips = [
            TopicIdPartition(uuid.uuid4(), f"bench-{i % 20}", i)
            for i in range(args.user_partitions)
        ]
        t0 = time.perf_counter()
        fill(io, logs, part, records_for(tips, 0, args.segments))
        print(
            f"backend={args.backend} segments={args.segments} records={2 * args.segments} "
            f"user_partitions={len(tips)} metadata_partitions={n_mp}"
        )
        print(f"fill (bulk load, not measured as manager work): {time.perf_counter() - t0:.2f} s")

        base = {"remote.log.metadata.topic.num.partitions": str(n_mp)}
        full_s, rlmm = time_to_ready(
            io, tips, {**base, "remote.log.metadata.snapshot.enable": "false"}
        )
        total = sum(len(list(rlmm.list_remote_log_segments(t))) for t in tips)
        assert total == args.segments, total
        rlmm.close()
        print(f"full replay: ready in {full_s:.2f} s")

        snaps = root / "snaps"
        with_snaps = {**base, "remote.log.metadata.snapshot.dir": str(snaps)}
        _, rlmm = time_to_ready(io, tips, with_snaps)
        t0 = time.perf_counter()
        rlmm.close()  # writes the snapshots
        size = sum(p.stat().st_size for p in snaps.iterdir())
        print(f"writing snapshots on close: {time.perf_counter() - t0:.2f} s, {size / 1e6:.1f} MB")

        snap_s, rlmm = time_to_ready(io, tips, with_snaps)
        rlmm.close()
        print(f"from snapshots: ready in {snap_s:.2f} s")

        tail = max(args.segments // 100, 1)
        fill(io, logs, part, records_for(tips, args.segments, tail))
        tail_s, rlmm = time_to_ready(io, tips, with_snaps)
        total = sum(len(list(rlmm.list_remote_log_segments(t))) for t in tips)
        assert total == args.segments + tail, total
        rlmm.close()
        print(f"from snapshots + tail of {tail} segments: ready in {tail_s:.2f} s")
        verdict = "meets" if max(snap_s, tail_s) < 5 else "MISSES"
        print(f"target < 5 s with snapshots: {verdict}")
        shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
