"""Driving a real ``tierlog serve`` whose remote tier is the object-store plugin.

The broker runs as a subprocess (``helpers.broker.BrokerProcess``) with
``remote.log.storage.manager.class.name=objectstore`` and the plugin's settings passed as
``rsm.config.*`` overrides, exactly as an operator would configure it. Topics use small
segments (``SEGMENT_BYTES``) and ``local.retention.bytes=1`` so every sealed segment is
uploaded and then leaves the local tier; what happened is observed through the wire
protocol (ListOffsets -4/-5), the partition directory and the bucket itself.
"""

from __future__ import annotations

import functools
import hashlib
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.wire import EARLIEST_LOCAL, LATEST_TIERED
from tierlog.client import WireConnection
from tierlog.protocol.errors import ErrorCode

SEGMENT_BYTES = 64 * 1024

#: Broker settings of every test broker: tasks every 500 ms, local segments deleted at once.
BROKER_OVERRIDES: dict[str, str] = {
    "remote.log.manager.task.interval.ms": "500",
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "0",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
    "remote.log.storage.manager.class.name": "objectstore",
}


def broker_overrides(rsm_props: Mapping[str, str]) -> dict[str, str]:
    return {**BROKER_OVERRIDES, **{f"rsm.config.{k}": v for k, v in rsm_props.items()}}


def tiered_topic_configs(**extra: str) -> dict[str, str]:
    return {
        "remote.storage.enable": "true",
        "segment.bytes": str(SEGMENT_BYTES),
        "local.retention.bytes": "1",
        **extra,
    }


def value_of(partition: int, i: int) -> bytes:
    """About 300 bytes: a JSON-like compressible part and a digest that is not, so chunks
    compress without being trivial, and every value is unique and checkable."""
    digest = hashlib.sha256(b"%d/%d" % (partition, i)).hexdigest()
    return (
        b'{"partition":%d,"seq":%08d,"user":"user-%04d","event":"page_view","path":'
        b'"/catalog/items/%06d","digest":"%s","pad":"%s"}'
        % (partition, i, i % 997, i * 7 % 100_000, digest.encode(), b"x" * (i % 90))
    )


@dataclass
class Consumed:
    records: list[tuple[int, bytes]] = field(default_factory=list)
    errors: list[KafkaError] = field(default_factory=list)


@dataclass
class ObjectStoreBroker:
    broker: BrokerProcess

    @property
    def bootstrap(self) -> str:
        return str(self.broker.bootstrap)

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            code, message = c.create_topic(name, partitions, configs)
        assert code == 0, (code, message)

    def list_offset(self, topic: str, partition: int, timestamp: int) -> int:
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            r = c.list_offset(topic, partition, timestamp)
        assert r.error_code == 0, ErrorCode(r.error_code)
        return r.offset

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the broker's samples called ``name`` whose labels include ``labels``."""
        return self.broker.metric(name, **labels)

    def local_segments(self, topic: str, partition: int) -> list[int]:
        d = self.broker.log_dir / f"{topic}-{partition}"
        return sorted(int(p.name.split(".")[0]) for p in d.glob("*.log"))

    def fully_tiered(self, topic: str, partition: int) -> bool:
        """Every sealed segment is remote and gone locally: only the active one is left."""
        local = self.local_segments(topic, partition)
        if len(local) != 1 or local[0] == 0:
            return False
        return (
            self.list_offset(topic, partition, LATEST_TIERED) == local[0] - 1
            and self.list_offset(topic, partition, EARLIEST_LOCAL) == local[0]
        )

    def wait_fully_tiered(self, topic: str, partitions: int, timeout_s: float = 90.0) -> None:
        for p in range(partitions):
            wait_until(
                functools.partial(self.fully_tiered, topic, p),
                timeout_s,
                interval_s=0.1,
                what=f"{topic}-{p} fully tiered; local segments {self.local_segments(topic, p)}",
            )

    def produce(
        self, topic: str, partition: int, count: int, *, compression: str = "none", start: int = 0
    ) -> None:
        """``count`` records with ``value_of(partition, i)``, acks=all, in producer batches
        of up to 16 KiB (several batches per segment)."""
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 16 * 1024,
                "compression.type": compression,
            }
        )
        failures: list[KafkaError] = []
        for i in range(start, start + count):
            producer.produce(
                topic,
                value=value_of(partition, i),
                partition=partition,
                on_delivery=lambda err, _m: failures.append(err) if err is not None else None,
            )
            producer.poll(0)
        assert producer.flush(60) == 0
        assert not failures, failures[:3]

    def consume(
        self, topic: str, partition: int, count: int, *, timeout_s: float = 60.0
    ) -> Consumed:
        """Read from offset 0 until ``count`` records, the first error, or the deadline."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"g-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
            }
        )
        out = Consumed()
        try:
            consumer.assign([CkTopicPartition(topic, partition, 0)])
            deadline = time.monotonic() + timeout_s
            while len(out.records) < count and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is None:
                    continue
                error = m.error()
                if error is not None:
                    out.errors.append(error)
                    break
                offset, value = m.offset(), m.value()
                assert offset is not None and value is not None
                out.records.append((offset, value))
        finally:
            consumer.close()
        return out


def expected_records(partition: int, count: int) -> list[tuple[int, bytes]]:
    return [(i, value_of(partition, i)) for i in range(count)]


def remote_objects(root: Path, suffix: str) -> list[Path]:
    return sorted(root.rglob(f"*{suffix}"))
