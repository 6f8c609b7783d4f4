"""KIP-405 in a cluster, with three real ``tierlog serve`` processes on a real ZooKeeper and
one remote tier they share (the directory RSM over a common directory):

* ``__remote_log_metadata`` is a replicated topic created through the controller with
  ``remote.log.metadata.topic.replication.factor`` replicas;
* only the leader of a tiered partition copies (followers run the follower task);
* a replica that was down while the leader tiered and deleted its local segments
  bootstraps from the remote tier (OFFSET_MOVED_TO_TIERED_STORAGE, then its auxiliary
  state, spec §7.2): its local log starts above 0 with the leader's epoch checkpoint and
  producer state, an idempotent producer goes on without OUT_OF_ORDER_SEQUENCE once it
  leads, and a consumer from offset 0 reads the remote data through it;
* a leader killed in the middle of a copy (stalled at the RSM boundary) leaves, once the
  new leader has settled, remote segments covering the history exactly once;
* after an unclean election the new leader's expiration task deletes the remote segments
  that are no longer in its leader-epoch lineage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka
import pytest
from kazoo.client import KazooClient

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.election import read_controller
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState
from tierlog.log.checkpoint import read_epoch_checkpoint
from tierlog.log.producer_state import ProducerEntry, decode_snapshot
from tierlog.protocol.api_keys import ApiKey
from tierlog.storage.directory import COPY, DELETE, StorageEvent, read_events

TOPIC = "tiered"
METADATA_TOPIC = "__remote_log_metadata"
N = 5
"""Records (one per batch) per segment."""
STALLING_RSM = "tests.cluster.stalling_rsm:StallingDirectoryRemoteStorageManager"


def _recipe(**extra: str) -> dict[str, str]:
    """Kafka's tiered-storage test recipe: a segment rolls after N batches and every
    uploaded segment leaves the local tier."""
    return {
        "remote.storage.enable": "true",
        "index.interval.bytes": "1",
        "segment.index.bytes": str(12 * N),
        "local.retention.bytes": "1",
        "min.insync.replicas": "1",
        **extra,
    }


@dataclass
class Cluster:
    brokers: dict[int, BrokerProcess]
    kazoo: KazooClient
    remote: Path

    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def state(self, topic: str = TOPIC, p: int = 0) -> PartitionState | None:
        path = paths.partition_state(topic, p)
        if self.kazoo.exists(path) is None:
            return None
        return PartitionState.decode(self.kazoo.get(path)[0])

    def leader(self) -> int:
        s = self.state()
        assert s is not None
        return s.leader

    def local_segments(self, broker: int, topic: str = TOPIC) -> list[int]:
        d = self.brokers[broker].log_dir / f"{topic}-0"
        return sorted(int(p.name.split(".")[0]) for p in d.glob("*.log"))

    def epochs(self, broker: int) -> list[tuple[int, int]]:
        return read_epoch_checkpoint(
            self.brokers[broker].log_dir / f"{TOPIC}-0" / "leader-epoch-checkpoint"
        )

    def events(self) -> list[StorageEvent]:
        return [
            e
            for b in self.brokers
            for e in read_events(self.remote, b)
            if e.topic == TOPIC and e.index_type is None
        ]

    def live_segments(self) -> list[tuple[int, int]]:
        """(start, end) of every segment copied to the shared tier and not deleted."""
        copied = {
            e.segment_id: (e.start_offset, e.end_offset)
            for e in self.events()
            if e.type == COPY and not e.failed
        }
        deleted = {e.segment_id for e in self.events() if e.type == DELETE and not e.failed}
        return sorted(r for sid, r in copied.items() if sid not in deleted)

    def copiers(self) -> set[int]:
        return {e.broker_id for e in self.events() if e.type == COPY and not e.failed}


def _overrides(zk_connect: str, broker_id: int, remote: Path, rsm: str) -> dict[str, str]:
    return {
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": "2000",
        "broker.id": str(broker_id),
        "replica.lag.time.max.ms": "4000",
        "replica.fetch.wait.max.ms": "200",
        "replica.fetch.backoff.ms": "100",
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": rsm,
        "rsm.config.dir": str(remote),
        "remote.log.manager.task.interval.ms": "300",
        "log.retention.check.interval.ms": "300",
        "log.segment.delete.delay.ms": "0",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
    }


def _start(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo: KazooClient,
    tmp_path: Path,
    rsm: str = "directory",
    extra: dict[str, str] | None = None,
) -> Cluster:
    remote = tmp_path / "remote"
    remote.mkdir()
    brokers = {
        i: broker_factory(overrides={**_overrides(zk_connect, i, remote, rsm), **(extra or {})})
        for i in (1, 2, 3)
    }
    wait_until(lambda: sorted(live_brokers(kazoo)) == [1, 2, 3], 20, what="all registered")
    cluster = Cluster(brokers, kazoo, remote)
    wait_until(
        lambda: cluster.state(METADATA_TOPIC, 0) is not None,
        60,
        what=f"{METADATA_TOPIC} created by the controller",
    )
    return cluster


def _create_topic(cluster: Cluster, replicas: list[int], **configs: str) -> None:
    """CreateTopics with an explicit assignment, sent to the controller."""
    controller = read_controller(cluster.kazoo)
    assert controller is not None
    with WireConnection.to_bootstrap(cluster.brokers[controller].bootstrap) as conn:
        r = conn.call(
            ApiKey.CREATE_TOPICS,
            5,
            topics=[
                {
                    "name": TOPIC,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                    "configs": [{"name": k, "value": v} for k, v in _recipe(**configs).items()],
                }
            ],
            timeout=30000,
            validate_only=False,
        )
    assert int(r.topics[0].error_code) == 0, r.topics[0].error_message
    wait_until(
        lambda: all((b.log_dir / f"{TOPIC}-0").is_dir() for b in cluster.brokers.values()),
        20,
        what="the partition on every broker",
    )


class Producing:
    """An idempotent acks=all producer that records every outcome."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 60000,
            }
        )
        self.sent = 0
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[str] = []

    def send(self, count: int) -> None:
        """``count`` records, one batch each (flushed one by one)."""
        for _ in range(count):
            value = b"v-%05d" % self.sent
            self.sent += 1

            def done(err: object, msg: confluent_kafka.Message, value: bytes = value) -> None:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    offset = msg.offset()
                    assert offset is not None
                    self.acked.append((offset, value))

            self.producer.produce(TOPIC, value=value, partition=0, on_delivery=done)
            assert self.producer.flush(60) == 0
        assert not self.errors, self.errors


def _producers(entries: Iterable[ProducerEntry]) -> dict[int, tuple[int, int, int]]:
    return {e.producer_id: (e.producer_epoch, e.last_seq, e.last_offset) for e in entries}


def _consume_all(bootstrap: str, count: int) -> list[tuple[int, bytes]]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes]] = []

    def read_all() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            offset, value = msg.offset(), msg.value()
            assert offset is not None and value is not None
            got.append((offset, value))
        return len(got) >= count

    try:
        wait_until(read_all, 90, interval_s=0, what=f"{count} records consumed")
    finally:
        consumer.close()
    return got


@pytest.fixture
def cluster(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> Iterator[Cluster]:
    yield _start(broker_factory, zk_connect, kazoo_client, tmp_path)


def test_metadata_topic_is_replicated_and_only_the_leader_copies(cluster: Cluster) -> None:
    """``__remote_log_metadata`` has the configured replication factor, and the segments of
    a tiered RF=3 partition are uploaded once, by its leader; the followers' local logs
    follow the leader's uploads (local retention gated on them)."""
    metadata_replicas = _replicas(cluster, METADATA_TOPIC)
    assert len(metadata_replicas) == 3
    assert all(sorted(r) == [1, 2, 3] for r in metadata_replicas.values())
    _create_topic(cluster, [2, 1, 3])
    producing = Producing(cluster.bootstrap())
    producing.send(4 * N + 1)
    wait_until(
        lambda: cluster.live_segments() == [(i * N, i * N + N - 1) for i in range(4)],
        60,
        what=f"4 segments tiered; saw {cluster.live_segments()}",
    )
    assert cluster.copiers() == {2}
    wait_until(
        lambda: all(cluster.local_segments(b)[0] == 4 * N for b in (1, 2, 3)),
        60,
        what="every replica deleted its tiered local segments",
    )


def _replicas(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    data = json.loads(cluster.kazoo.get(paths.topic(topic))[0])
    return {int(p): list(r) for p, r in data["partitions"].items()}


def test_new_replica_bootstraps_from_remote(cluster: Cluster) -> None:
    """Broker 3 is down while broker 1 tiers and deletes its local segments; back, it is
    answered OFFSET_MOVED_TO_TIERED_STORAGE and rebuilds its state from the remote tier
    instead of copying the history. Then it leads: the idempotent producer goes on, and a
    consumer from offset 0 reads the remote data through it."""
    assert all(len(r) == 3 for r in _replicas(cluster, METADATA_TOPIC).values())
    _create_topic(cluster, [1, 3, 2])
    b3 = cluster.brokers[3]
    b3.kill()
    producing = Producing(cluster.bootstrap())
    producing.send(4 * N + 2)
    wait_until(
        lambda: cluster.local_segments(1)[0] == 4 * N,
        60,
        what=f"broker 1 tiered 4 segments; local {cluster.local_segments(1)}",
    )
    b3.start()
    wait_until(
        lambda: (s := cluster.state()) is not None and sorted(s.isr) == [1, 2, 3],
        60,
        what="broker 3 back in the ISR",
    )
    follower_segments = cluster.local_segments(3)
    assert follower_segments[0] == 4 * N, follower_segments
    assert cluster.epochs(3) == cluster.epochs(1)
    snapshot = b3.log_dir / f"{TOPIC}-0" / f"{4 * N:020d}.snapshot"
    follower_producers = {e.producer_id: e for e in decode_snapshot(snapshot.read_bytes())}
    assert len(follower_producers) == 1
    (entry,) = follower_producers.values()
    assert entry.last_seq == 4 * N - 1
    leader_snapshot = cluster.brokers[1].log_dir / f"{TOPIC}-0" / f"{4 * N:020d}.snapshot"
    if leader_snapshot.exists():
        leader_producers = {e.producer_id: e for e in decode_snapshot(leader_snapshot.read_bytes())}
        assert _producers(leader_producers.values()) == _producers(follower_producers.values())
    assert cluster.live_segments() == [(i * N, i * N + N - 1) for i in range(4)]

    cluster.brokers[1].kill()
    wait_until(lambda: cluster.leader() == 3, 30, what="broker 3 leads")
    producing.send(N)
    assert not producing.errors
    got = _consume_all(cluster.bootstrap(), producing.sent)
    assert got[: producing.sent] == sorted(producing.acked)
    assert [v for _, v in got[: producing.sent]] == [b"v-%05d" % i for i in range(producing.sent)]
