"""Driving a real tiered ``tierlog serve`` the way Kafka's tiered-storage tests do.

Kafka's recipe (spec §8 and the seeds): one record per batch, ``index.interval.bytes=1`` so
every batch gets an index entry, ``segment.index.bytes=12*N`` so a segment rolls after N
batches (the time index is full), ``local.retention.bytes=1`` so every uploaded segment
leaves the local tier, and task intervals of 500 ms. What happened is then asserted through
the directory RSM's event log (``<data dir>-remote/events-<broker>.jsonl``), the Prometheus
metrics and what real clients see.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.wire import EARLIEST_LOCAL, LATEST_TIERED
from tierlog.client import WireConnection
from tierlog.log.names import TopicPartition
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.storage.directory import StorageEvent, read_events, write_faults

#: Records (batches) per segment.
N = 5
RECORD_PAD = b"." * 64

#: Broker settings of every tiered test broker.
TIERED_OVERRIDES: dict[str, str] = {
    # the directory plugin at its embedded default root (<data dir>-remote), for its event log
    "remote.log.storage.manager.class.name": "directory",
    "remote.log.manager.task.interval.ms": "500",
    "log.retention.check.interval.ms": "500",
    "log.segment.delete.delay.ms": "0",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
}


def recipe(**extra: str) -> dict[str, str]:
    """Topic configs of Kafka's tiered-storage test recipe, plus ``extra``."""
    return {
        "remote.storage.enable": "true",
        "index.interval.bytes": "1",
        "segment.index.bytes": str(12 * N),
        "local.retention.bytes": "1",
        **extra,
    }


def value_of(i: int) -> bytes:
    return b"record-%05d-" % i + RECORD_PAD


@dataclass(frozen=True)
class Seg:
    start: int
    end: int


class TieredBroker:
    """A ``BrokerProcess`` plus the views a tiered test needs."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self._producer: Producer | None = None

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def remote_root(self) -> Path:
        """The embedded default: ``<first log dir>-remote``."""
        log_dir = self.broker.log_dir
        return log_dir.with_name(log_dir.name + "-remote")

    # ---- admin over the wire ------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None
    ) -> None:
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            code, message = c.create_topic(name, partitions, configs)
        assert code == 0, (code, message)

    def alter(self, topic: str, **settings: str | None) -> tuple[int, str | None]:
        """IncrementalAlterConfigs SET (value) / DELETE (None); returns (error, message)."""
        ops = [
            {"name": k.replace("_", "."), "config_operation": 0 if v is not None else 1, "value": v}
            for k, v in settings.items()
        ]
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            r = c.call(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                1,
                resources=[{"resource_type": 2, "resource_name": topic, "configs": ops}],
                validate_only=False,
            )
        res = r.responses[0]
        return int(res.error_code), res.error_message

    def delete_topic(self, topic: str) -> None:
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            r = c.call(ApiKey.DELETE_TOPICS, 5, topic_names=[topic], timeout=30_000)
        assert r.responses[0].error_code == 0

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            r = c.call(
                ApiKey.DELETE_RECORDS,
                2,
                topics=[
                    {
                        "name": topic,
                        "partitions": [{"partition_index": partition, "offset": offset}],
                    }
                ],
                timeout=30_000,
            )
        p = r.topics[0].partitions[0]
        assert p.error_code == 0, ErrorCode(p.error_code)
        return int(p.low_watermark)

    def list_offsets(
        self, topic: str, partition: int, timestamp: int, version: int = 9
    ) -> tuple[int, int, int, int]:
        """(error code, offset, leader epoch, timestamp) of one ListOffsets lookup."""
        with WireConnection.to_bootstrap(self.bootstrap) as c:
            r = c.list_offset(topic, partition, timestamp, version=version)
        return r.error_code, r.offset, r.leader_epoch, r.timestamp

    def wait_tiered_up_to(self, topic: str, end: int, partition: int = 0) -> None:
        """Wait until every record below ``end`` is uploaded and gone from the local tier.

        Producers write ``end + 1`` records: the last one rolls the full segment before it (a
        segment of N batches rolls on the next append) and stays in the active segment."""
        wait_until(
            lambda: (
                self.list_offsets(topic, partition, LATEST_TIERED)[1] == end - 1
                and self.list_offsets(topic, partition, EARLIEST_LOCAL)[1] == end
            ),
            30,
            what=f"{topic}-{partition} tiered up to {end}",
        )

    # ---- data ---------------------------------------------------------------------------
    def produce(
        self,
        topic: str,
        indexes: Iterable[int],
        *,
        partition: int = 0,
        timestamp_of: Callable[[int], int] | None = None,
    ) -> None:
        """One record per batch (flush after each), value ``value_of(i)``, increasing
        timestamps (now + i ms unless ``timestamp_of`` says otherwise)."""
        if self._producer is None:
            self._producer = Producer(
                {"bootstrap.servers": self.bootstrap, "linger.ms": 0, "acks": "all"}
            )
        base = int(time.time() * 1000)
        errors: list[Any] = []
        for i in indexes:
            ts = timestamp_of(i) if timestamp_of is not None else base + i
            self._producer.produce(
                topic,
                value=value_of(i),
                partition=partition,
                timestamp=ts,
                on_delivery=lambda err, _m: errors.append(err) if err is not None else None,
            )
            assert self._producer.flush(30) == 0
        assert not errors, errors

    def local_segments(self, topic: str, partition: int = 0) -> list[int]:
        """Base offsets of the ``.log`` files in the partition directory."""
        d = self.broker.log_dir / f"{topic}-{partition}"
        return sorted(int(p.name.split(".")[0]) for p in d.glob("*.log"))

    # ---- the event log ------------------------------------------------------------------
    def events(
        self, topic: str, kind: str | None = None, *, partition: int | None = None
    ) -> list[StorageEvent]:
        return [
            e
            for e in read_events(self.remote_root, 0)
            if e.topic == topic
            and (kind is None or e.type == kind)
            and (partition is None or e.partition == partition)
        ]

    def segs(self, topic: str, kind: str, *, failed: bool = False) -> list[Seg]:
        return [
            Seg(e.start_offset, e.end_offset)
            for e in self.events(topic, kind)
            if e.failed == failed
        ]

    def wait_segs(
        self, topic: str, kind: str, expected: Sequence[Seg], timeout_s: float = 30.0
    ) -> None:
        """Wait until exactly ``expected`` (in order) succeeded for ``kind``; fail if more."""
        wait_until(
            lambda: len(self.segs(topic, kind)) >= len(expected),
            timeout_s,
            what=f"{kind} of {expected} for {topic}; saw {self.segs(topic, kind)}",
        )
        assert self.segs(topic, kind) == list(expected)

    def arm_faults(self, **faults: int) -> None:
        write_faults(self.remote_root, **faults)

    # ---- metrics ------------------------------------------------------------------------
    def _scrape(self) -> str:
        with urllib.request.urlopen(self.broker.metrics_url + "/metrics", timeout=10) as r:
            return str(r.read().decode())

    def metric(self, name: str, **labels: str | int) -> float:
        """Sum of the samples called ``name`` whose labels include ``labels``."""
        want = {k: str(v) for k, v in labels.items()}
        total = 0.0
        for family in text_string_to_metric_families(self._scrape()):
            for s in family.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
                    total += float(s.value)
        return total

    def sample_names(self) -> set[str]:
        return {
            s.name
            for family in text_string_to_metric_families(self._scrape())
            for s in family.samples
        }

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None


@contextmanager
def tiered_broker(
    base: Path, overrides: Mapping[str, str] | None = None, **kw: Any
) -> Iterator[TieredBroker]:
    """A started ``tierlog serve`` under ``base`` with ``TIERED_OVERRIDES`` and then
    ``overrides`` (``kw`` as for ``BrokerProcess``), closed on exit."""
    b = BrokerProcess(base, {**TIERED_OVERRIDES, **(overrides or {})}, **kw)
    b.start()
    tb = TieredBroker(b)
    try:
        yield tb
    finally:
        tb.close()
        b.close()


def segments_of(count: int, per_segment: int = N) -> list[Seg]:
    """The first ``count`` full segments of a recipe topic."""
    return [Seg(i * per_segment, (i + 1) * per_segment - 1) for i in range(count)]


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


def consume_confluent(bootstrap: str, topic: str, count: int) -> list[tuple[int, bytes]]:
    """Read partition 0 from offset 0 until ``count`` records (or 30 s) with confluent-kafka."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([CkTopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            offset, value = m.offset(), m.value()
            assert offset is not None and value is not None
            got.append((offset, value))
        return got
    finally:
        c.close()
