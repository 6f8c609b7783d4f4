"""kill -9 the broker while a confluent-kafka producer (acks=all) streams into it, five
times, then check what the log kept.

The producer runs in its own thread and never pauses for the crash: records keep being
queued while the broker is dead and librdkafka keeps retrying them. Two producers:

* idempotent (acks=all implied): retries cross the crash, so the restarted broker must
  recognise batches it already wrote (producer state rebuilt from snapshots and the log).
  Every record must end up acknowledged and stored exactly once, in production order.
* plain acks=all without retries: records in flight at the crash may fail; each one that
  was acknowledged must be stored exactly once, and the stored records of a partition must
  be in production order.

Production goes on across the kills, on two partitions, and offsets must be dense after
recovery.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until

CYCLES = 5
PARTITIONS = 2
#: records queued but not yet acknowledged or failed; bounds the stream without sleeping
MAX_IN_FLIGHT = 2000

#: Each restart after a kill recovers every partition; with the default 50-partition internal
#: topics that is ~100 empty logs per restart. One partition each keeps the same code paths.
SMALL_INTERNAL_TOPICS = {
    "offsets.topic.num.partitions": "1",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
}

PRODUCER_MODES: dict[str, dict[str, Any]] = {
    "idempotent": {"enable.idempotence": True},
    "acks-all-no-retries": {"acks": "all", "retries": 0, "enable.idempotence": False},
}


class ProduceStream:
    """A producer thread sending ``%08d`` sequence numbers round-robin over the partitions."""

    def __init__(self, bootstrap: str, topic: str, extra: dict[str, Any]) -> None:
        self._producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 2,
                "message.timeout.ms": 60_000,
                "reconnect.backoff.ms": 20,
                "reconnect.backoff.max.ms": 200,
                **extra,
            }
        )
        self._topic = topic
        self.sent = 0
        self.acked: list[int] = []
        self.failed: list[tuple[int, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def _on_delivery(self, err: ck.KafkaError | None, msg: ck.Message) -> None:
        value = msg.value()
        assert value is not None
        if err is None:
            self.acked.append(int(value))
        else:
            self.failed.append((int(value), err.name()))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self.sent - len(self.acked) - len(self.failed) >= MAX_IN_FLIGHT:
                    self._producer.poll(0.01)
                    continue
                seq = self.sent
                try:
                    self._producer.produce(
                        self._topic,
                        value=b"%08d" % seq,
                        partition=seq % PARTITIONS,
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    self._producer.poll(0.01)
                    continue
                self.sent += 1
                self._producer.poll(0)
            remaining = self._producer.flush(90)
            assert remaining == 0, f"{remaining} records neither acknowledged nor failed"
        except BaseException as e:
            self.error = e

    def finish(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "producer did not finish"
        if self.error is not None:
            raise AssertionError(f"producer thread failed: {self.error!r}") from self.error


def _wait_acks(stream: ProduceStream, count: int) -> None:
    wait_until(lambda: len(stream.acked) >= count or stream.error, 60, what=f"{count} acks")
    assert stream.error is None, stream.error


def _stored(bootstrap: str, topic: str, partition: int) -> list[tuple[int, int]]:
    """(offset, sequence number) of every record in the partition, read up to its end."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crash-verify",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    out: list[tuple[int, int]] = []
    try:
        tp = ck.TopicPartition(topic, partition)
        _, high = c.get_watermark_offsets(tp, timeout=30)
        c.assign([ck.TopicPartition(topic, partition, ck.OFFSET_BEGINNING)])

        def read_more() -> bool:
            for m in c.consume(1000, 0.2):
                err = m.error()
                if err is None:
                    offset, value = m.offset(), m.value()
                    assert offset is not None and value is not None
                    out.append((offset, int(value)))
                else:
                    assert err.code() == ck.KafkaError._PARTITION_EOF, err
            return len(out) >= high

        wait_until(read_more, 60, interval_s=0, what=f"{high} records of partition {partition}")
    finally:
        c.close()
    return out


@pytest.mark.parametrize("mode", sorted(PRODUCER_MODES))
def test_kill_9_mid_stream_keeps_acknowledged_records_once_and_in_order(
    broker_factory: Callable[..., BrokerProcess], mode: str
) -> None:
    b = broker_factory(SMALL_INTERNAL_TOPICS)
    topic = f"crash-{mode}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    rng = random.Random(405)

    stream = ProduceStream(b.bootstrap, topic, PRODUCER_MODES[mode])
    stream.start()
    try:
        for cycle in range(CYCLES):
            target = len(stream.acked) + rng.randrange(300, 1500)
            _wait_acks(stream, target)
            in_flight = stream.sent - len(stream.acked) - len(stream.failed)
            b.kill()
            assert not (b.log_dir / ".kafka_cleanshutdown").exists()
            b.start()
            # the stream was mid-flight at the kill, and the restarted broker takes it back
            assert in_flight > 0, f"cycle {cycle}: nothing in flight at the kill"
            resumed = len(stream.acked) + 100
            _wait_acks(stream, resumed)
    finally:
        stream.finish()

    acked = set(stream.acked)
    assert len(acked) == len(stream.acked), "a record was acknowledged twice"
    if mode == "idempotent":
        assert stream.failed == [], stream.failed[:5]
        assert len(acked) == stream.sent
    for p in range(PARTITIONS):
        stored = _stored(b.bootstrap, topic, p)
        offsets = [o for o, _ in stored]
        seqs = [s for _, s in stored]
        assert offsets == list(range(len(stored))), "offsets are not dense after recovery"
        assert len(set(seqs)) == len(seqs), "a record is stored twice"
        assert seqs == sorted(seqs), "records of a partition are out of production order"
        assert all(s % PARTITIONS == p for s in seqs)
        mine = {s for s in acked if s % PARTITIONS == p}
        missing = sorted(mine - set(seqs))
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
        if mode == "idempotent":
            assert seqs == list(range(p, stream.sent, PARTITIONS))
