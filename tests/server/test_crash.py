"""Crash test: kill -9 the broker in the middle of an acks=all produce stream, restart it,
and check that every acknowledged record is present exactly once and in order (5 cycles)."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from helpers.broker import BrokerProcess

CYCLES = 5


def test_kill_9_during_produce_loses_no_acknowledged_record(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("crash-t", 1, 1)])["crash-t"].result(30)
    acked: list[bytes] = []

    def on_delivery(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is None:
            acked.append(msg.value())

    for cycle in range(CYCLES):
        producer = ck.Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 1,
                "message.timeout.ms": 30000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
            }
        )
        start = len(acked)
        i = 0
        # produce until ~200 records of this cycle are acknowledged, then crash the broker
        while len(acked) - start < 200:
            producer.produce(
                "crash-t", value=b"%d-%06d" % (cycle, i), partition=0, on_delivery=on_delivery
            )
            i += 1
            producer.poll(0)
            if i % 50 == 0:
                producer.poll(0.01)
        for _ in range(100):  # keep the stream going while the broker dies
            producer.produce(
                "crash-t", value=b"%d-%06d" % (cycle, i), partition=0, on_delivery=on_delivery
            )
            i += 1
        broker.kill()
        broker.start()
        producer.flush(60)
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "crash-check",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition("crash-t", 0, ck.OFFSET_BEGINNING)])
    stored: list[bytes] = []
    end = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    _, high = end.get_watermark_offsets(ck.TopicPartition("crash-t", 0), timeout=30)
    end.close()
    deadline = time.monotonic() + 60
    while len(stored) < high and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            stored.append(m.value())
    consumer.close()
    assert len(stored) == high
    positions = {v: n for n, v in enumerate(stored)}
    assert len(positions) == len(stored), "a record is stored twice"
    missing = [v for v in acked if v not in positions]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    # per cycle, acknowledged records appear in production order
    for cycle in range(CYCLES):
        prefix = b"%d-" % cycle
        order = [positions[v] for v in sorted(v for v in acked if v.startswith(prefix))]
        assert order == sorted(order)
