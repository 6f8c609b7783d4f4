"""Offload and consume: segments leave the local tier and every client still reads them all."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.helpers.kcat import consume_kcat
from tests.helpers.poll import wait_until
from tests.helpers.wire import (
    EARLIEST_LOCAL,
    LATEST_TIERED,
    fetch_fields,
    fetch_partition,
    offsets_and_values,
)
from tests.tiered.e2e.e2e_helpers import (
    N,
    Seg,
    TieredBroker,
    consume_confluent,
    recipe,
    segments_of,
    value_of,
)
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.metrics import METRIC_DOCS


def _consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tp = KpTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in records)
        return got
    finally:
        c.close()


def test_offloaded_topic_is_read_whole_by_kcat_confluent_and_kafka_python(
    tiered: TieredBroker,
) -> None:
    topic = "offload-clients"
    count = 20 * N  # remote; one more record stays local: 99% of the topic is remote
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(count + 1))
    tiered.wait_tiered_up_to(topic, count)
    assert tiered.segs(topic, "COPY") == segments_of(count // N)
    assert tiered.local_segments(topic) == [count]
    expected = [(i, value_of(i)) for i in range(count + 1)]

    assert consume_confluent(tiered.bootstrap, topic, count + 1) == expected
    assert _consume_kafka_python(tiered.bootstrap, topic, count + 1) == expected
    assert consume_kcat(tiered.bootstrap, topic) == expected

    fetched = {Seg(e.start_offset, e.end_offset) for e in tiered.events(topic, "FETCH")}
    assert fetched == set(segments_of(count // N))
    assert tiered.metric("tierlog_remote_fetch_requests_total", topic=topic) >= 3 * len(fetched)
    assert tiered.metric("tierlog_remote_fetch_errors_total", topic=topic) == 0


def test_offload_and_consume_across_a_restart(tiered: TieredBroker) -> None:
    topic = "offload-restart"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(3 * N + 1))
    tiered.wait_tiered_up_to(topic, 3 * N)
    copies = segments_of(3)
    assert tiered.segs(topic, "COPY") == copies
    assert tiered.metric("tierlog_remote_copy_requests_total", topic=topic) == 3
    copied_bytes = tiered.metric("tierlog_remote_copy_bytes_total", topic=topic)
    assert copied_bytes > 3 * N * len(value_of(0))

    tiered.broker.restart()
    # the first copy run after the restart finds the uploaded offsets in the metadata topic
    wait_until(lambda: tiered.list_offsets(topic, 0, LATEST_TIERED)[1] == 3 * N - 1, 30)
    assert tiered.list_offsets(topic, 0, -2)[1] == 0
    assert tiered.list_offsets(topic, 0, EARLIEST_LOCAL)[1] == 3 * N
    expected = [(i, value_of(i)) for i in range(3 * N + 1)]
    assert consume_confluent(tiered.bootstrap, topic, 3 * N + 1) == expected
    assert {Seg(e.start_offset, e.end_offset) for e in tiered.events(topic, "FETCH")} == set(copies)

    # A reloaded active segment indexes its next batch only after one more append (as in
    # Kafka), so it may hold N + 1 batches: produce until one more segment is sealed.
    tiered.produce(topic, range(3 * N + 1, 5 * N + 1))
    wait_until(lambda: len(tiered.segs(topic, "COPY")) >= 4, 30, what="a copy after restart")
    copies_now = tiered.segs(topic, "COPY")
    # nothing was uploaded twice: the first copy after the restart continues at 3N
    assert copies_now[:3] == copies and copies_now[3].start == 3 * N
    tiered.wait_tiered_up_to(topic, copies_now[-1].end + 1)
    expected += [(i, value_of(i)) for i in range(3 * N + 1, 5 * N + 1)]
    assert consume_confluent(tiered.bootstrap, topic, 5 * N + 1) == expected


def test_active_segment_is_rolled_when_local_retention_is_breached(tiered: TieredBroker) -> None:
    topic = "roll-on-breach"
    tiered.create_topic(topic, 1, recipe(**{"local.retention.ms": "1000"}))
    tiered.produce(topic, range(3))  # fewer than N: the segment never fills up
    tiered.wait_segs(topic, "COPY", [Seg(0, 2)])
    wait_until(lambda: tiered.local_segments(topic) == [3], 30, what="local segment 0 deleted")
    assert tiered.list_offsets(topic, 0, EARLIEST_LOCAL)[:2] == (0, 3)


def test_one_fetch_of_eight_remote_partitions_reads_them_all_at_once(
    tiered: TieredBroker,
) -> None:
    """One Fetch starts the remote reads of all eight partitions together. A read still
    running once others have records (``remote.fetch.partial.wait.ms``) comes back empty
    without an error and is the next Fetch's at that offset, as a consumer fetches again."""
    topic = "eight-remote"
    parts = 8
    tiered.create_topic(topic, parts, recipe())
    for p in range(parts):
        tiered.produce(topic, range(2 * N + 1), partition=p)
    for p in range(parts):
        tiered.wait_tiered_up_to(topic, 2 * N, p)

    def fetch(c: WireConnection, partitions: list[int]) -> dict[int, Any]:
        topics = {topic: [fetch_partition(p, 0) for p in partitions]}
        r = c.call(
            ApiKey.FETCH,
            12,
            **fetch_fields(topics, max_bytes=50 << 20, max_wait=500, min_bytes=1),
        )
        return {p.partition_index: p for p in r.responses[0].partitions}

    with WireConnection.to_bootstrap(tiered.bootstrap) as c:
        got = fetch(c, list(range(parts)))
        assert sorted(got) == list(range(parts))
        wait_until(
            lambda: {e.partition for e in tiered.events(topic, "FETCH")} == set(range(parts)),
            30,
            what="every partition's remote read started by the first Fetch",
        )
        deadline = time.monotonic() + 30
        while empty := [p for p, resp in got.items() if not resp.records and not resp.error_code]:
            assert time.monotonic() < deadline, f"partitions {empty} never answered"
            got |= fetch(c, empty)
    for p, resp in got.items():
        assert resp.error_code == 0
        rows = offsets_and_values(bytes(resp.records or b""))
        # one remote read never spans two remote segments
        assert rows == [(i, value_of(i)) for i in range(N)], p


def test_every_documented_remote_metric_is_exported(tiered: TieredBroker) -> None:
    topic = "documented-metrics"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(N + 1))
    tiered.wait_tiered_up_to(topic, N)
    names = tiered.sample_names()
    for doc in METRIC_DOCS:
        if not doc.name.startswith("tierlog_remote_"):
            continue
        exported = doc.name + "_count" if doc.kind == "summary" else doc.name
        assert exported in names, doc.name


def _follower_fetch(tb: TieredBroker, topic: str, offset: int) -> tuple[int, int, bytes]:
    with WireConnection.to_bootstrap(tb.bootstrap) as c:
        topics = {topic: [fetch_partition(0, offset)]}
        r = c.call(ApiKey.FETCH, 12, **fetch_fields(topics, max_bytes=1 << 20, replica_id=1))
    p = r.responses[0].partitions[0]
    return int(p.error_code), int(p.high_watermark), bytes(p.records or b"")


def test_follower_fetch_below_the_local_log_start_is_told_offset_moved_to_tiered_storage(
    tiered: TieredBroker,
) -> None:
    topic = "follower-fetch"
    tiered.create_topic(topic, 1, recipe())
    tiered.produce(topic, range(2 * N + 1))
    tiered.wait_tiered_up_to(topic, 2 * N)
    fetches = len(tiered.events(topic, "FETCH"))
    code, hw, records = _follower_fetch(tiered, topic, 0)
    assert (code, hw, records) == (int(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE), 2 * N + 1, b"")
    assert len(tiered.events(topic, "FETCH")) == fetches  # a follower never reads remote data
    code, _, records = _follower_fetch(tiered, topic, 2 * N)
    assert code == 0 and offsets_and_values(records) == [(2 * N, value_of(2 * N))]
