"""Fetch sessions (KIP-227) with real consumers against a real broker: many partitions
consumed correctly, and the broker's session metrics show the sessions in use; and the
session rules on the wire."""

from __future__ import annotations

import uuid
from typing import Any

import confluent_kafka as ck
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.wire import fetch_partition
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

PARTITIONS = 64
PER_PARTITION = 20


def _fill(b: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for part in range(PARTITIONS):
        for i in range(PER_PARTITION):
            p.produce(topic, value=b"%d-%d" % (part, i), partition=part)
    assert p.flush(30) == 0


def _produce_more(b: BrokerProcess, topic: str, partitions: range) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for part in partitions:
        p.produce(topic, value=b"%d-late" % part, partition=part)
    assert p.flush(30) == 0


def _expected(partitions: range, late: bool) -> set[bytes]:
    out = {b"%d-%d" % (p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)}
    return out | ({b"%d-late" % p for p in partitions} if late else set())


def test_kafka_python_consumes_many_partitions_through_a_session(broker: BrokerProcess) -> None:
    _fill(broker, "fs-kp")
    c = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
    )
    try:
        c.assign([kafka.TopicPartition("fs-kp", p) for p in range(PARTITIONS)])
        got: list[bytes] = []

        def drain(n: int) -> bool:
            for msgs in c.poll(timeout_ms=200).values():
                got.extend(m.value for m in msgs)
            return len(got) >= n

        wait_until(lambda: drain(PARTITIONS * PER_PARTITION), timeout_s=60)
        wait_until(lambda: broker.metric("tierlog_fetch_incremental_requests_total") > 0)
        assert broker.metric("tierlog_fetch_sessions") >= 1
        assert broker.metric("tierlog_fetch_session_partitions_cached") == PARTITIONS
        late = range(0, PARTITIONS, 7)
        _produce_more(broker, "fs-kp", late)
        wait_until(lambda: drain(PARTITIONS * PER_PARTITION + len(late)), timeout_s=60)
        assert sorted(got) == sorted(_expected(late, True))
    finally:
        c.close()


def test_confluent_kafka_consumes_many_partitions(broker: BrokerProcess) -> None:
    """librdkafka 2.16 does not implement KIP-227: its fetches are full ones, and must keep
    working next to the session cache."""
    _fill(broker, "fs-ck")
    c = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "fs-ck",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.assign([ck.TopicPartition("fs-ck", p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: list[bytes] = []

        def drain(n: int) -> bool:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(bytes(m.value() or b""))
            return len(got) >= n

        wait_until(lambda: drain(PARTITIONS * PER_PARTITION), timeout_s=60)
        late = range(3, PARTITIONS, 5)
        _produce_more(broker, "fs-ck", late)
        wait_until(lambda: drain(PARTITIONS * PER_PARTITION + len(late)), timeout_s=60)
        assert sorted(got) == sorted(_expected(late, True))
    finally:
        c.close()


def _fetch(
    c: WireConnection,
    session_id: int,
    epoch: int,
    parts: dict[int, int],
    forgotten: list[int] | None = None,
) -> Any:
    """Fetch v12 of topic fs-wire: ``parts`` maps partition to fetch offset."""
    return _session_fetch(c, 12, session_id, epoch, {"topic": "fs-wire"}, parts, forgotten)


def _session_fetch(
    c: WireConnection,
    version: int,
    session_id: int,
    epoch: int,
    topic: dict[str, Any],
    parts: dict[int, int],
    forgotten: list[int] | None = None,
) -> Any:
    """A Fetch in a session: ``topic`` names the topic (``{"topic": name}`` up to v12,
    ``{"topic_id": id}`` from v13), ``parts`` maps partition to fetch offset."""
    return c.call(
        ApiKey.FETCH,
        version,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[{**topic, "partitions": [fetch_partition(p, off) for p, off in parts.items()]}]
        if parts
        else [],
        forgotten_topics_data=[{**topic, "partitions": forgotten}] if forgotten else [],
        rack_id="",
    )


def _answered(r: Any) -> list[int]:
    return sorted(int(p.partition_index) for t in r.responses for p in t.partitions)


def test_session_rules_on_the_wire(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("fs-wire", 4, 1)])["fs-wire"].result(30)
    with WireConnection.to_bootstrap(broker.bootstrap) as c:
        full = _fetch(c, 0, 0, {p: 0 for p in range(4)})
        sid = int(full.session_id)
        assert full.error_code == 0 and sid != 0 and _answered(full) == [0, 1, 2, 3]
        idle = _fetch(c, sid, 1, {})
        assert (idle.error_code, idle.session_id, _answered(idle)) == (0, sid, [])
        _produce_more(broker, "fs-wire", range(2, 3))
        news = _fetch(c, sid, 2, {})
        assert _answered(news) == [2]
        assert news.responses[0].partitions[0].records
        moved = _fetch(c, sid, 3, {2: 1}, forgotten=[0])
        assert (
            _answered(moved) == [] and broker.metric("tierlog_fetch_session_partitions_cached") == 3
        )
        wrong = _fetch(c, sid, 7, {})
        assert (wrong.error_code, wrong.session_id) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        missing = _fetch(c, sid + 1, 1, {})
        assert missing.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert _fetch(c, sid, 4, {}).error_code == 0  # the session outlived both errors
        closed = _fetch(c, sid, -1, {1: 0})
        assert (closed.error_code, closed.session_id, _answered(closed)) == (0, 0, [1])
        assert _fetch(c, sid, 5, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert broker.metric("tierlog_fetch_sessions") == 0


def _fetch_by_id(
    c: WireConnection, session_id: int, epoch: int, topic_id: uuid.UUID, parts: dict[int, int]
) -> Any:
    """Fetch v13 (topic ids): ``parts`` maps partition to fetch offset."""
    return _session_fetch(c, 13, session_id, epoch, {"topic_id": topic_id}, parts)


def test_a_session_by_topic_ids_and_a_version_switch(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("fs-ids", 2, 1)])["fs-ids"].result(30)
    with WireConnection.to_bootstrap(broker.bootstrap) as c:
        meta = c.call(
            ApiKey.METADATA,
            12,
            topics=[{"topic_id": uuid.UUID(int=0), "name": "fs-ids"}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        tid = meta.topics[0].topic_id
        full = _fetch_by_id(c, 0, 0, tid, {0: 0, 1: 0})
        sid = int(full.session_id)
        assert sid != 0 and _answered(full) == [0, 1]
        assert full.responses[0].topic_id == tid
        assert _answered(_fetch_by_id(c, sid, 1, tid, {})) == []
        _produce_more(broker, "fs-ids", range(1, 2))
        news = _fetch_by_id(c, sid, 2, tid, {})
        assert _answered(news) == [1] and news.responses[0].topic_id == tid
        switched = _fetch(c, sid, 3, {})  # v12 (names) into a session of topic ids
        assert switched.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_a_full_cache_answers_sessionless_and_zero_slots_never_open_one(
    broker_factory: Any,
) -> None:
    one = broker_factory({"max.incremental.fetch.session.cache.slots": "1"})
    none = broker_factory({"max.incremental.fetch.session.cache.slots": "0"})
    for b in (one, none):
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("fs-wire", 2, 1)])["fs-wire"].result(30)
    with WireConnection.to_bootstrap(one.bootstrap) as c:
        first = _fetch(c, 0, 0, {0: 0, 1: 0})
        second = _fetch(c, 0, 0, {0: 0})  # the one session is young: no consumer evicts it
        assert first.session_id != 0
        assert (second.error_code, second.session_id, _answered(second)) == (0, 0, [0])
    assert one.metric("tierlog_fetch_sessions") == 1
    assert one.metric("tierlog_fetch_session_evictions_total") == 0
    with WireConnection.to_bootstrap(none.bootstrap) as c:
        full = _fetch(c, 0, 0, {0: 0, 1: 0})
        assert (full.error_code, full.session_id, _answered(full)) == (0, 0, [0, 1])
    assert none.metric("tierlog_fetch_sessions") == 0
