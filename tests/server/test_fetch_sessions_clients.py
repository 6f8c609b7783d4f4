"""Fetch sessions (KIP-227) with real consumers against a real broker: many partitions
consumed correctly, and the broker's session metrics show the sessions in use."""

from __future__ import annotations

import time
import urllib.request

import confluent_kafka as ck
import kafka
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from helpers.broker import BrokerProcess
from helpers.poll import wait_until

PARTITIONS = 64
PER_PARTITION = 20


def _metric(b: BrokerProcess, name: str) -> float:
    with urllib.request.urlopen(b.metrics_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(
        float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    )


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
        wait_until(lambda: _metric(broker, "tierlog_fetch_incremental_requests_total") > 0)
        assert _metric(broker, "tierlog_fetch_sessions") >= 1
        assert _metric(broker, "tierlog_fetch_session_partitions_cached") == PARTITIONS
        late = range(0, PARTITIONS, 7)
        _produce_more(broker, "fs-kp", late)
        wait_until(lambda: drain(PARTITIONS * PER_PARTITION + len(late)), timeout_s=60)
        assert sorted(got) == sorted(_expected(late, True))
    finally:
        c.close()


def test_confluent_kafka_consumes_many_partitions(broker: BrokerProcess) -> None:
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
        time.sleep(0.5)
        print("incremental", _metric(broker, "tierlog_fetch_incremental_requests_total"))
    finally:
        c.close()
