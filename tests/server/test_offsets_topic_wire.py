"""``__consumer_offsets`` as a compacted topic, through real clients and a real broker:
DeleteGroups and OffsetDelete write tombstones, what they removed stays removed after a
restart, and committed offsets survive a restart once the cleaner has compacted the topic."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import confluent_kafka as ck
import kafka
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.errors import GroupSubscribedToTopicError, NoError

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.schema import GroupKey, OffsetKey, decode_key

OFFSETS = "__consumer_offsets"
#: One offsets partition (every group lands on it), small segments so the cleaner reaches
#: commits soon, and a cleaner that looks every 100 ms.
OVERRIDES = {
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": "8192",
    "log.cleaner.backoff.ms": "100",
}
OFFSET_INVALID = -1001


def _topic(b: BrokerProcess, name: str = "t", partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _commit(b: BrokerProcess, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A commit with no group membership (generation -1), as an ``assign()`` consumer does."""
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        c.commit(
            offsets=[ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            asynchronous=False,
        )
    finally:
        c.close()


def _committed(b: BrokerProcess, group: str, tps: list[tuple[str, int]]) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([ck.TopicPartition(*tp) for tp in tps], 30)]
    finally:
        c.close()


def _offsets_log(b: BrokerProcess) -> list[tuple[OffsetKey | GroupKey, bytes | None]]:
    """Every record of ``__consumer_offsets-0`` read back by a plain kafka-python consumer."""
    c = kafka.KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(OFFSETS, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        rows: list[tuple[OffsetKey | GroupKey, bytes | None]] = []
        deadline = time.monotonic() + 30
        while c.position(tp) < end and time.monotonic() < deadline:
            for m in c.poll(timeout_ms=200).get(tp, []):
                rows.append((decode_key(m.key), m.value))
        return rows
    finally:
        c.close()


def test_deleted_group_leaves_tombstones_and_is_gone_after_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(OVERRIDES)
    _topic(b)
    _commit(b, "doomed", {("t", 0): 5, ("t", 1): 6})
    _commit(b, "kept", {("t", 0): 7})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_consumer_groups(["doomed"], request_timeout=30)["doomed"].result(30)

    rows = _offsets_log(b)
    tombstones = {key for key, value in rows if value is None}
    assert tombstones == {
        OffsetKey("doomed", "t", 0),
        OffsetKey("doomed", "t", 1),
        GroupKey("doomed"),
    }

    b.restart()
    assert _committed(b, "doomed", [("t", 0), ("t", 1)]) == [OFFSET_INVALID] * 2
    assert _committed(b, "kept", [("t", 0)]) == [7]
    listed = AdminClient({"bootstrap.servers": b.bootstrap}).list_consumer_groups().result(30)
    assert "doomed" not in {g.group_id for g in listed.valid}


def _offset_delete(b: BrokerProcess, group: str, topic: str, partition: int) -> tuple[int, int]:
    """OffsetDelete v0 over the wire: (group error, first partition's error)."""
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        r = c.call(
            ApiKey.OFFSET_DELETE,
            0,
            group_id=group,
            topics=[{"name": topic, "partitions": [{"partition_index": partition}]}],
        )
    part = r.topics[0].partitions[0].error_code if r.topics else -1
    return int(r.error_code), int(part)


def test_offset_delete_with_kafka_python_admin_and_over_the_wire(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(OVERRIDES)
    _topic(b)
    _commit(b, "simple", {("t", 0): 10, ("t", 1): 11})
    admin = kafka.KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        result = admin.delete_group_offsets("simple", [kafka.TopicPartition("t", 0)])
        assert result == {kafka.TopicPartition("t", 0): NoError}
    finally:
        admin.close()
    assert _committed(b, "simple", [("t", 0), ("t", 1)]) == [OFFSET_INVALID, 11]
    assert _offset_delete(b, "simple", "t", 1) == (ErrorCode.NONE, ErrorCode.NONE)
    assert _offset_delete(b, "missing", "t", 0)[0] == ErrorCode.GROUP_ID_NOT_FOUND

    live = ck.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": "live",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    try:
        live.subscribe(["t"])
        deadline = time.monotonic() + 30
        while not live.assignment() and time.monotonic() < deadline:
            live.poll(0.2)
        assert live.assignment()
        live.commit(offsets=[ck.TopicPartition("t", 0, 3)], asynchronous=False)
        assert _offset_delete(b, "live", "t", 0) == (
            ErrorCode.NONE,
            ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        )
        admin = kafka.KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            refused = admin.delete_group_offsets("live", [kafka.TopicPartition("t", 0)])
            assert refused == {kafka.TopicPartition("t", 0): GroupSubscribedToTopicError}
        finally:
            admin.close()
    finally:
        live.close()

    b.restart()
    assert _committed(b, "simple", [("t", 0), ("t", 1)]) == [OFFSET_INVALID] * 2
    assert _committed(b, "live", [("t", 0)]) == [3]


def _cleaned_up_to(b: BrokerProcess) -> int:
    path = b.log_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        topic, part, offset = line.split(" ")
        if (topic, part) == (OFFSETS, "0"):
            return int(offset)
    return -1


def test_offsets_survive_restart_after_cleaning(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory(OVERRIDES)
    _topic(b)
    commits = 600
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "busy"})
    try:
        for i in range(commits):
            c.commit(
                offsets=[ck.TopicPartition("t", 0, i), ck.TopicPartition("t", 1, 2 * i)],
                asynchronous=False,
            )
    finally:
        c.close()
    _commit(b, "once", {("t", 0): 42})
    wait_until(lambda: _cleaned_up_to(b) > commits // 2, timeout_s=60, what="a cleaning")
    assert len(_offsets_log(b)) < commits

    b.restart()
    assert _committed(b, "busy", [("t", 0), ("t", 1)]) == [commits - 1, 2 * (commits - 1)]
    assert _committed(b, "once", [("t", 0)]) == [42]
    loaded = re.findall(r"loaded (\d+) groups from (\d+) __consumer_offsets records", b.stderr)
    assert loaded, b.stderr[-2000:]
    groups, records = map(int, loaded[-1])
    assert groups == 2
    assert records < commits
