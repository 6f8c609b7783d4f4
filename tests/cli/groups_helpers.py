"""What the ``tierlog consumer-groups`` tests share: the CLI run as an operator runs it,
records with known timestamps, offsets committed by real consumers, and the committed
offsets read back over the wire (so a test checks the broker, not the CLI's own output)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import confluent_kafka

from tests.helpers.cluster import run_cli
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

DAY_MS = 86_400_000


def groups_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tierlog consumer-groups --bootstrap-server B ...``."""
    return run_cli("consumer-groups", "--bootstrap-server", bootstrap, *args)


def table(stdout: str) -> list[dict[str, str]]:
    """A printed table as rows keyed by its header; every column is one word wide, except
    the header cells ``COORDINATOR (ID)`` and a coordinator's ``host:port  (id)``."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    header = lines[0].replace("COORDINATOR (ID)", "COORDINATOR").split()
    rows = []
    for line in lines[1:]:
        cells = line.replace("  (", "(").split()
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with WireConnection.to_bootstrap(bootstrap) as conn:
        code, message = conn.create_topic(topic, partitions, {"retention.ms": "-1"})
    assert code == 0, message


def produce_days(bootstrap: str, topic: str, partitions: int, count: int, now_ms: int) -> None:
    """``count`` records in each partition, record ``i`` stamped ``count - i`` days before
    ``now_ms`` (so offset ``i`` is the first record at or after that time)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for p in range(partitions):
        for i in range(count):
            producer.produce(
                topic, b"v%d" % i, partition=p, timestamp=now_ms - (count - i) * DAY_MS
            )
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit as a consumer that never joins (the group stays Empty)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[confluent_kafka.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


@contextmanager
def active_member(
    bootstrap: str, group: str, topics: Sequence[str], client_id: str = "lag-reader"
) -> Iterator[confluent_kafka.Consumer]:
    """A subscribed consumer holding its assignment (the group Stable) until the block
    ends, when it leaves the group."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(list(topics))
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, "no assignment within 30 s"
            consumer.poll(0.1)
        yield consumer
    finally:
        consumer.close()


def first_offsets_read(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The offset each partition's first record has when a consumer of ``group`` starts:
    where the group resumes."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    first: dict[int, int] = {}

    def all_seen() -> bool:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            p, o = msg.partition(), msg.offset()
            assert p is not None and o is not None
            first.setdefault(p, o)
        return len(first) == partitions

    try:
        wait_until(all_seen, 30, interval_s=0, what="a record from every partition")
    finally:
        consumer.close()
    return first


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """OffsetFetch of every topic on the group's coordinator (the broker's truth after a
    reset)."""
    with WireConnection.to_bootstrap(bootstrap) as conn:
        found = conn.call(ApiKey.FIND_COORDINATOR, 3, key=group, key_type=0)
    assert int(found.error_code) == 0
    with WireConnection(str(found.host), int(found.port)) as conn:
        r = conn.call(ApiKey.OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False)
    assert int(r.error_code) == 0
    return {
        (t.name, int(p.partition_index)): int(p.committed_offset)
        for t in r.topics
        for p in t.partitions
        if int(p.committed_offset) >= 0
    }
