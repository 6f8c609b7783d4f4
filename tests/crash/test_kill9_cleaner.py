"""kill -9 the broker while its log cleaner works on a compacted topic, several times.

Each cycle writes a burst of keyed updates and tombstones (acks=all, all acknowledged before
the kill), lets the cleaner start on them for a random moment, SIGKILLs the broker and
restarts it. A crash may land while ``.cleaned`` files are written, during the renames to
``.swap`` or during the swap itself; recovery at load completes or rolls back the swap.
After every restart a fresh consumer reads the partition from the start:

* offsets are unique and increasing, and each record is the one written at that offset;
* the latest value of every key written so far is there at its offset (nothing lost);
* once the cleaner has caught up at the end, fewer records remain than were written.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.helpers.broker import BrokerProcess
from tests.helpers.confluent import read_to_high_watermark
from tests.helpers.poll import wait_until

TOPIC = "kv"
CYCLES = 5
PER_CYCLE = 6000
KEYS = 300
SMALL_INTERNAL_TOPICS = {
    "offsets.topic.num.partitions": "1",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "1",
}

Record = tuple[bytes, bytes | None]


def _produce(bootstrap: str, cycle: int, rng: random.Random, written: dict[int, Record]) -> None:
    p = ck.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "batch.size": 16384}
    )
    failures: list[str] = []

    def delivered(err: ck.KafkaError | None, msg: ck.Message) -> None:
        if err is not None:
            failures.append(str(err))
            return
        offset, key = msg.offset(), msg.key()
        assert offset is not None and key is not None
        written[offset] = (key, msg.value())

    for i in range(PER_CYCLE):
        key = b"key-%04d" % rng.randrange(KEYS)
        value = None if rng.random() < 0.05 else b"c%d-%d-" % (cycle, i) + b"x" * 150
        p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not failures, failures[:3]


def _check(rows: list[tuple[int, bytes, bytes | None]], written: dict[int, Record]) -> None:
    offsets = [r[0] for r in rows]
    assert offsets == sorted(set(offsets)), "duplicate or unordered offsets"
    for offset, key, value in rows:
        assert written.get(offset) == (key, value), f"record at {offset} is not what was written"
    latest: dict[bytes, int] = {}
    for offset in sorted(written):
        latest[written[offset][0]] = offset
    present = set(offsets)
    lost = [o for o in latest.values() if written[o][1] is not None and o not in present]
    assert not lost, f"latest values lost at offsets {lost[:5]}"


def test_kill9_during_cleaning_loses_nothing(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    rng = random.Random(20261124)
    broker = broker_factory(
        {**SMALL_INTERNAL_TOPICS, "log.cleaner.backoff.ms": "5", "log.cleaner.threads": "1"}
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "65536",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(30)
    written: dict[int, Record] = {}
    for cycle in range(CYCLES):
        _produce(broker.bootstrap, cycle, rng, written)
        time.sleep(rng.uniform(0.0, 0.6))
        broker.restart(kill=True)
        _check(read_to_high_watermark(broker.bootstrap, TOPIC, timeout_s=60), written)
    part_dir = broker.log_dir / f"{TOPIC}-0"

    def caught_up() -> bool:
        names = [p.name for p in part_dir.iterdir()]
        return not any(n.endswith((".cleaned", ".swap")) for n in names) and (
            len(read_to_high_watermark(broker.bootstrap, TOPIC, timeout_s=60)) < len(written) // 2
        )

    wait_until(caught_up, timeout_s=120, interval_s=0.5, what="the cleaner to catch up")
    _check(read_to_high_watermark(broker.bootstrap, TOPIC, timeout_s=60), written)
    assert "Traceback" not in broker.stderr
    log = broker.stderr
    recoveries = {
        phase: log.count(text)
        for phase, text in (
            ("rolled back", "of an interrupted cleaning"),
            ("completed", "completed the swap"),
            ("swapped", "swapped in cleaned segment"),
        )
    }
    print(f"cleaner crash recoveries over {CYCLES} kills: {recoveries}")
