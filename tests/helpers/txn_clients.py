"""Helpers of the transactional client tests: a confluent-kafka transactional producer, a
consumer reading a whole topic at either isolation level, and topic creation."""

from __future__ import annotations

import confluent_kafka as ck

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection


def transactional_producer(bootstrap: str, tid: str, **extra: object) -> ck.Producer:
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "linger.ms": 5,
            **extra,
        }
    )
    p.init_transactions(30)
    return p


def read_all(
    bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 1
) -> list[bytes]:
    """Values of every partition of ``topic`` from the start, until ``expect`` arrived and the
    consumer reached the end (the LSO for read_committed)."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        got: list[bytes] = []
        eof: set[int] = set()

        def done() -> bool:
            m = c.poll(0.2)
            if m is not None:
                error = m.error()
                if error is not None:
                    assert error.code() == ck.KafkaError._PARTITION_EOF, error
                    eof.add(int(m.partition() or 0))
                else:
                    got.append(bytes(m.value() or b""))
            return len(got) >= expect and len(eof) == partitions

        wait_until(done, timeout_s=30, interval_s=0, what=f"{expect} records of {topic}")
        return got
    finally:
        c.close()


def create_topic(broker: BrokerProcess, topic: str, partitions: int = 1) -> None:
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        assert conn.create_topic(topic, partitions)[0] == 0
