"""Remote deletion (retention by size and time, DeleteRecords, topic deletion) and ListOffsets
against a tiered partition."""

from __future__ import annotations

import time

from tests.helpers.poll import wait_until
from tests.helpers.wire import EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED
from tests.tiered.e2e.e2e_helpers import N, Seg, TieredBroker, recipe, segments_of
from tierlog.protocol.errors import ErrorCode


def _remote_segment_size(tb: TieredBroker, topic: str) -> int:
    sizes = {p.stat().st_size for p in tb.remote_root.glob(f"{topic}-0-*/*.log")}
    assert len(sizes) == 1, sizes  # same-sized records: every full segment has one size
    return sizes.pop()


def test_remote_segments_are_deleted_by_retention_size(tiered: TieredBroker) -> None:
    topic = "retention-size"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(4 * N + 1))
    tiered.wait_tiered_up_to(topic, 4 * N)
    assert tiered.segs(topic, "DELETE") == []
    seg = _remote_segment_size(tiered, topic)
    local = sum(p.stat().st_size for p in (tiered.broker.log_dir / f"{topic}-0").glob("*.log"))
    total = 4 * seg + local
    # 1.5 segments over the limit: exactly the oldest segment has to go
    assert tiered.alter(topic, **{"retention.bytes": str(total - seg - seg // 2)})[0] == 0
    tiered.wait_segs(topic, "DELETE", segments_of(1))
    wait_until(lambda: tiered.list_offsets(topic, 0, EARLIEST)[1] == N, 30, what="log start")
    assert tiered.metric("tierlog_remote_delete_requests_total", topic=topic) == 1
    wait_until(
        lambda: tiered.metric("tierlog_remote_log_metadata_count", topic=topic) == 3,
        30,
        what="metadata count gauge",
    )
    assert tiered.metric("tierlog_remote_log_size_bytes", topic=topic) == 3 * seg


def test_remote_segments_are_deleted_by_retention_time(tiered: TieredBroker) -> None:
    topic = "retention-time"
    tiered.create_topic(topic, 1, recipe())
    now = int(time.time() * 1000)
    hour_ago = now - 3_600_000
    # two segments an hour old, then recent records
    tiered.produce(
        topic,
        range(4 * N + 1),
        timestamp_of=lambda i: (hour_ago if i < 2 * N else now) + i,
    )
    tiered.wait_tiered_up_to(topic, 4 * N)
    assert tiered.segs(topic, "DELETE") == []
    assert tiered.alter(topic, **{"retention.ms": "600000"})[0] == 0
    tiered.wait_segs(topic, "DELETE", segments_of(2))
    wait_until(lambda: tiered.list_offsets(topic, 0, EARLIEST)[1] == 2 * N, 30, what="log start")


def test_delete_records_deletes_the_remote_segments_below_the_new_log_start(
    tiered: TieredBroker,
) -> None:
    topic = "retention-delete-records"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(4 * N + 1))
    tiered.wait_tiered_up_to(topic, 4 * N)
    assert tiered.delete_records(topic, 0, 2 * N + 2) == 2 * N + 2
    tiered.wait_segs(topic, "DELETE", segments_of(2))
    assert tiered.list_offsets(topic, 0, EARLIEST)[1] == 2 * N + 2
    # the segment holding the new log start stays
    assert Seg(2 * N, 3 * N - 1) not in tiered.segs(topic, "DELETE")


def test_topic_deletion_deletes_every_remote_segment(tiered: TieredBroker) -> None:
    topic = "retention-topic-delete"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(3 * N + 1))
    tiered.wait_tiered_up_to(topic, 3 * N)
    tiered.delete_topic(topic)
    # DeleteTopics returns after the remote data is gone
    assert sorted(tiered.segs(topic, "DELETE"), key=lambda s: s.start) == segments_of(3)
    assert list(tiered.remote_root.glob(f"{topic}-0-*/*.log")) == []
    assert tiered.metric("tierlog_remote_delete_requests_total", topic=topic) == 3


def test_list_offsets_earliest_local_tiered_latest_and_by_timestamp(
    tiered: TieredBroker,
) -> None:
    topic = "list-offsets"
    tiered.create_topic(topic, 1, recipe())
    t0 = int(time.time() * 1000) - 60_000
    tiered.produce(topic, range(3 * N + 1), timestamp_of=lambda i: t0 + 1000 * i)
    tiered.wait_tiered_up_to(topic, 3 * N)

    assert tiered.list_offsets(topic, 0, EARLIEST) == (0, 0, 0, -1)
    assert tiered.list_offsets(topic, 0, EARLIEST_LOCAL, version=8) == (0, 3 * N, 0, -1)
    assert tiered.list_offsets(topic, 0, LATEST_TIERED) == (0, 3 * N - 1, 0, -1)
    assert tiered.list_offsets(topic, 0, LATEST)[:2] == (0, 3 * N + 1)
    unsupported = int(ErrorCode.UNSUPPORTED_VERSION)
    assert tiered.list_offsets(topic, 0, EARLIEST_LOCAL, version=7)[0] == unsupported
    assert tiered.list_offsets(topic, 0, LATEST_TIERED, version=8)[0] == unsupported

    # by timestamp, in the remote tier: the time index of segment [5, 9] finds offset 7
    before = len(tiered.events(topic, "FETCH_INDEX"))
    assert tiered.list_offsets(topic, 0, t0 + 7000 - 500) == (0, 7, 0, t0 + 7000)
    fetched = tiered.events(topic, "FETCH_INDEX")[before:]
    assert {Seg(e.start_offset, e.end_offset) for e in fetched} == {Seg(N, 2 * N - 1)}
    assert "TIMESTAMP" in {e.index_type for e in fetched}
    # by timestamp, still local: no remote index is touched
    before = len(tiered.events(topic))
    assert tiered.list_offsets(topic, 0, t0 + 1000 * 3 * N) == (0, 3 * N, 0, t0 + 3000 * N)
    assert len(tiered.events(topic)) == before
    # after the last record: nothing
    assert tiered.list_offsets(topic, 0, t0 + 10**7)[:2] == (0, -1)


def test_list_offsets_of_a_topic_that_is_not_tiered(tiered: TieredBroker) -> None:
    topic = "list-offsets-local"
    tiered.create_topic(topic, 1, {"segment.index.bytes": str(12 * N)})
    tiered.produce(topic, range(N + 1))
    assert tiered.list_offsets(topic, 0, EARLIEST_LOCAL) == (0, 0, 0, -1)
    assert tiered.list_offsets(topic, 0, LATEST_TIERED) == (0, -1, -1, -1)
