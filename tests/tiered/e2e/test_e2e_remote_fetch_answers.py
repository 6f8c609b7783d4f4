"""Remote fetches answer when ready (Kafka's DelayedRemoteFetch): a Fetch whose remote reads
are done responds at once, even below ``min_bytes``, instead of parking in the purgatory
until ``max_wait`` and reading again."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition

from tests.helpers.poll import wait_until
from tests.helpers.wire import offsets_and_values
from tests.tiered.e2e.e2e_helpers import N, TieredBroker, recipe, value_of
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

EARLIEST_LOCAL, LATEST_TIERED = -4, -5
WAITS = "tierlog_fetch_purgatory_waits_total"
#: Far beyond what any test waits: a fetch that waited for it would fail the test.
LONG_WAIT_MS = 120_000
BIG_MIN_BYTES = 50 << 20


def _tiered_topic(tb: TieredBroker, topic: str, segments: int) -> None:
    tb.create_topic(topic, 1, recipe())
    end = segments * N
    tb.produce(topic, range(end + 1))
    wait_until(
        lambda: (
            tb.list_offsets(topic, 0, LATEST_TIERED)[1] == end - 1
            and tb.list_offsets(topic, 0, EARLIEST_LOCAL)[1] == end
        ),
        30,
        what=f"{topic} tiered up to {end}",
    )


def test_a_fetch_of_remote_data_below_min_bytes_is_answered_without_waiting(
    tiered: TieredBroker,
) -> None:
    topic = "remote-answers-at-once"
    _tiered_topic(tiered, topic, 2)
    waits = tiered.metric(WAITS)
    with WireConnection.to_bootstrap(tiered.bootstrap) as c:
        r = c.call(
            ApiKey.FETCH,
            12,
            replica_id=-1,
            max_wait=LONG_WAIT_MS,
            min_bytes=BIG_MIN_BYTES,
            max_bytes=BIG_MIN_BYTES * 2,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
    p = r.responses[0].partitions[0]
    assert p.error_code == 0
    assert offsets_and_values(bytes(p.records or b"")) == [(i, value_of(i)) for i in range(N)]
    assert tiered.metric(WAITS) == waits  # answered from the remote read, never parked


def test_a_consumer_with_large_min_bytes_and_max_wait_gets_remote_data(
    tiered: TieredBroker,
) -> None:
    topic = "remote-consumer-large-min-bytes"
    _tiered_topic(tiered, topic, 3)
    c = Consumer(
        {
            "bootstrap.servers": tiered.bootstrap,
            "group.id": f"g-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "fetch.min.bytes": BIG_MIN_BYTES,
            "fetch.wait.max.ms": LONG_WAIT_MS,
            "socket.timeout.ms": LONG_WAIT_MS + 10_000,
        }
    )
    try:
        c.assign([CkTopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30  # well below fetch.wait.max.ms
        while len(got) < 3 * N and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            offset, value = m.offset(), m.value()
            assert offset is not None and value is not None
            got.append((offset, value))
        assert got == [(i, value_of(i)) for i in range(3 * N)]
    finally:
        c.close()
