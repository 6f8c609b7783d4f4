"""Each replica of a compacted topic cleans its own log, as in Kafka, and the replicas agree.

Three real ``tierlog serve`` processes on a real ZooKeeper host an RF=3 compacted topic with
small segments. Keyed updates and tombstones are produced with acks=all; every broker's
cleaner cleans its own replica (bounded by that replica's high watermark), then cleans it
again once ``delete.retention.ms`` has passed so the tombstones go. A fresh consumer reads the
table from the leader; then the brokers stop and each broker's partition directory is read
file by file: every replica holds the latest value of every live key at the offset it was
written at, nothing else than what was written at each offset, and no expired tombstone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.confluent import read_to_high_watermark
from tests.helpers.poll import wait_until
from tierlog.cluster import paths
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState
from tierlog.protocol.records import iter_records, scan_batches

TOPIC = "table"
KEYS = [b"key-%02d" % i for i in range(20)]
Row = tuple[int, bytes | None, bytes | None]
"""(offset, key, value) of one record."""


def _start_cluster(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo: KazooClient
) -> dict[int, BrokerProcess]:
    brokers = {
        i: broker_factory(
            overrides={
                "zookeeper.connect": zk_connect,
                "zookeeper.session.timeout.ms": "2000",
                "broker.id": str(i),
                "remote.log.storage.system.enable": "false",
                "replica.fetch.wait.max.ms": "200",
                "replica.fetch.backoff.ms": "100",
                "log.cleaner.backoff.ms": "100",
            }
        )
        for i in range(1, 4)
    }
    wait_until(lambda: sorted(live_brokers(kazoo)) == [1, 2, 3], 20, what="all registered")
    return brokers


def _state(kazoo: KazooClient) -> PartitionState | None:
    path = paths.partition_state(TOPIC, 0)
    if kazoo.exists(path) is None:
        return None
    return PartitionState.decode(kazoo.get(path)[0])


def _full_isr(kazoo: KazooClient) -> bool:
    s = _state(kazoo)
    return s is not None and sorted(s.isr) == [1, 2, 3]


def _cleaned_up_to(b: BrokerProcess) -> int:
    """The replica's entry in its ``cleaner-offset-checkpoint``, or -1."""
    path = b.log_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        topic, part, offset = line.split(" ")
        if (topic, part) == (TOPIC, "0"):
            return int(offset)
    return -1


def _produce(
    bootstrap: str, items: list[tuple[bytes, bytes | None]], written: dict[int, Row]
) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for key, value in items:

        def delivered(
            err: object, msg: ck.Message, key: bytes = key, value: bytes | None = value
        ) -> None:
            assert err is None, err
            offset = msg.offset()
            assert offset is not None
            written[offset] = (offset, key, value)

        p.produce(TOPIC, key=key, value=value, partition=0, on_delivery=delivered)
        assert p.flush(30) == 0  # one batch per record: segments roll at record boundaries


def _read_replica(partition_dir: Path) -> list[Row]:
    """Every record of one broker's replica, read from its segment files."""
    rows: list[Row] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        for h in scan_batches(data):
            rows.extend((r.offset, r.key, r.value) for r in iter_records(data, h))
    return rows


def _latest(rows: Sequence[Row]) -> dict[bytes | None, Row]:
    table: dict[bytes | None, Row] = {}
    for row in rows:
        table[row[1]] = row
    return table


def test_replicas_clean_their_own_logs_and_agree(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, kazoo_client: KazooClient
) -> None:
    brokers = _start_cluster(broker_factory, zk_connect, kazoo_client)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "1024",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100",
        "min.insync.replicas": "2",
    }
    admin.create_topics([NewTopic(TOPIC, 1, 3, config=config)])[TOPIC].result(30)
    wait_until(lambda: _full_isr(kazoo_client), 20, what="full ISR")

    written: dict[int, Row] = {}
    for round_ in range(6):
        _produce(bootstrap, [(k, b"v%d-%s" % (round_, k)) for k in KEYS], written)
    gone = KEYS[:4]
    _produce(bootstrap, [(k, None) for k in gone], written)
    last_tombstone = max(written)
    # updates to the other keys seal the tombstones' segments on every replica
    for round_ in range(3):
        _produce(bootstrap, [(k, b"f%d-%s" % (round_, k)) for k in KEYS[10:]], written)
    wait_until(
        lambda: all(_cleaned_up_to(b) > last_tombstone for b in brokers.values()),
        90,
        what="every replica cleaned past the tombstones",
    )
    reached = {i: _cleaned_up_to(b) for i, b in brokers.items()}
    retention_over = time.monotonic() + 0.3
    wait_until(lambda: time.monotonic() >= retention_over, 5, what="delete.retention.ms")
    for round_ in range(3):
        _produce(bootstrap, [(k, b"g%d-%s" % (round_, k)) for k in KEYS[10:]], written)
    wait_until(
        lambda: all(_cleaned_up_to(b) > reached[i] for i, b in brokers.items()),
        90,
        what="a second cleaning on every replica",
    )

    expected = {
        key: row for key, row in _latest([written[o] for o in sorted(written)]).items() if row[2]
    }
    assert set(expected) == set(KEYS) - set(gone)
    consumed = read_to_high_watermark(bootstrap, TOPIC)
    assert {k: r for k, r in _latest(consumed).items() if r[2] is not None} == expected
    assert len(consumed) < len(written), "the leader's log was not compacted"

    for b in brokers.values():
        b.stop()
    views = {}
    for i, b in brokers.items():
        rows = _read_replica(b.log_dir / f"{TOPIC}-0")
        offsets = [r[0] for r in rows]
        assert offsets == sorted(set(offsets)), f"broker {i}: duplicate or unordered offsets"
        assert all(written[r[0]] == r for r in rows), f"broker {i}: a record changed"
        assert len(rows) < len(written), f"broker {i}: its replica was not compacted"
        assert not {r[1] for r in rows} & set(gone), (
            f"broker {i}: expired tombstones or values of deleted keys are still there"
        )
        views[i] = {k: r for k, r in _latest(rows).items() if r[2] is not None}
        assert views[i] == expected, f"broker {i}"
    assert views[1] == views[2] == views[3]
