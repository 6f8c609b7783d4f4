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
  that are no longer in its leader-epoch lineage;
* a replica reassigned to a broker that never held the partition bootstraps from the remote
  tier and serves remote reads once it leads (ReassignReplicaExpand/Move/Shrink);
* deleting a tiered topic while a replica is offline deletes its remote data exactly once and
  every replica's local files, the offline one's when it returns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from tests.cluster.stalling_rsm import copying_file, hold_file
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import assignment, run_cli
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.election import read_controller
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState
from tierlog.log.checkpoint import read_epoch_checkpoint
from tierlog.log.producer_state import ProducerEntry, decode_snapshot
from tierlog.protocol.api_keys import ApiKey
from tierlog.remote_segments import remote_segments
from tierlog.server.topics import STATE_FILE
from tierlog.storage.directory import COPY, DELETE, StorageEvent, read_events
from tierlog.tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
)
from tierlog.tiered.metadata.fold import fold_metadata
from tierlog.tiered.metadata.serde import deserialize

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


def _metadata_values(cluster: Cluster) -> list[bytes]:
    """Every record value of ``__remote_log_metadata``, read as a client from every metadata
    partition's leader, partition by partition in offset order. Nothing is committed: with a
    broker stopped the offsets topic may not exist yet (it wants three live brokers), and
    closing a consumer that commits then waits for a coordinator until librdkafka gives up."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap(),
            "group.id": "metadata-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {}
        for p in range(3):
            _low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(METADATA_TOPIC, p), timeout=10
            )
            ends[p] = high
        consumer.assign(
            [confluent_kafka.TopicPartition(METADATA_TOPIC, p, 0) for p in ends if ends[p] > 0]
        )
        values: dict[int, list[tuple[int, bytes]]] = {p: [] for p in ends}

        def read_all() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                offset, value, p = msg.offset(), msg.value(), msg.partition()
                assert offset is not None and value is not None and p is not None
                values[p].append((offset, value))
            return all(len(values[p]) >= ends[p] for p in ends)

        wait_until(read_all, 30, interval_s=0, what="the metadata topic read")
    finally:
        consumer.close()
    return [v for p in sorted(values) for _, v in sorted(values[p])]


def _metadata_segments(cluster: Cluster) -> list[RemoteLogSegmentMetadata]:
    """The topic's remote segments as ``__remote_log_metadata`` says, folded as the RLMM
    folds them."""
    caches = fold_metadata(_metadata_values(cluster), None)
    return [
        md
        for tip, cache in caches.items()
        if tip.topic == TOPIC
        for md in cache.list_all_remote_log_segments()
    ]


def _covered_once(segments: list[tuple[int, int]], end: int) -> bool:
    """``segments`` (start, end) cover [0, end) exactly once, in order."""
    expected = 0
    for start, last in sorted(segments):
        if start != expected:
            return False
        expected = last + 1
    return expected == end


def _audit(cluster: Cluster) -> dict[str, Any]:
    """``tierlog audit --json`` (a Spark job) over the shared tier; fails on errors."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tierlog",
            "audit",
            "--bootstrap-server",
            cluster.bootstrap(),
            "--json",
            "--rsm-class",
            "directory",
            "--rsm-config",
            f"dir={cluster.remote}",
        ],
        capture_output=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stdout.decode()[-3000:] + done.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


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
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    brokers = {
        i: broker_factory(
            overrides={**_overrides(zk_connect, i, remote, rsm), **(extra or {})}, env=env
        )
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

    def defined_everywhere() -> bool:
        """Every broker has persisted the topic's definition, and each replica has the
        partition (a broker killed in between would adopt the directory without its
        configs); the others hold no log of it."""
        for i, b in cluster.brokers.items():
            state = b.log_dir / STATE_FILE
            if (b.log_dir / f"{TOPIC}-0").is_dir() != (i in replicas) or not state.exists():
                return False
            if f'"{TOPIC}"' not in state.read_text():
                return False
        return True

    wait_until(defined_everywhere, 20, what="the topic on every broker")


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


def test_metadata_topic_is_replicated_only_the_leader_copies_and_any_broker_lists_it(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """``__remote_log_metadata`` has the configured replication factor (2 of 3 brokers, so
    one broker's RLMM reads a metadata partition it holds no replica of from its leader),
    and the segments of a tiered RF=3 partition are uploaded once, by its leader; the
    followers' local logs follow the leader's uploads (local retention gated on them).
    ``tierlog remote segments`` lists those segments whichever broker it bootstraps from:
    it reads each metadata partition on its leader."""
    cluster = _start(
        broker_factory,
        zk_connect,
        kazoo_client,
        tmp_path,
        extra={"rlmm.config.remote.log.metadata.topic.replication.factor": "2"},
    )
    metadata_replicas = _replicas(cluster, METADATA_TOPIC)
    assert len(metadata_replicas) == 3
    assert all(len(set(r)) == 2 for r in metadata_replicas.values())
    _create_topic(cluster, [2, 1, 3])
    producing = Producing(cluster.bootstrap())
    producing.send(4 * N + 1)
    wait_until(
        lambda: _tiered_below_active(cluster, (1, 2, 3)),
        60,
        what="the history tiered and every replica's tiered local segments deleted",
    )
    assert cluster.copiers() == {2}
    tiered = cluster.live_segments()
    for b in cluster.brokers.values():
        wait_until(partial(_listed_through, b, tiered), 30, what=f"the segments listed through {b}")


def _listed_through(broker: BrokerProcess, tiered: list[tuple[int, int]]) -> bool:
    """Whether ``tierlog remote segments`` bootstrapped from ``broker`` lists ``tiered``."""
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        rows = remote_segments(conn, TOPIC)
    finished = [r for r in rows if r["state"] == "COPY_SEGMENT_FINISHED"]
    return [(r["start_offset"], r["end_offset"]) for r in finished] == tiered


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
    # the kill may land before broker 3 wrote the new partition's partition.metadata; make
    # that the case every run: the restarted replica must take its topic id again
    (b3.log_dir / f"{TOPIC}-0" / "partition.metadata").unlink(missing_ok=True)
    producing = Producing(cluster.bootstrap())
    producing.send(4 * N + 2)
    start = wait_until(lambda: _tiered_below_active(cluster, (1, 2)), 60, what="history tiered")
    assert start >= 2 * N
    tiered = cluster.live_segments()
    b3.start()
    wait_until(
        lambda: (s := cluster.state()) is not None and sorted(s.isr) == [1, 2, 3],
        60,
        what="broker 3 back in the ISR",
    )
    follower_segments = cluster.local_segments(3)
    assert follower_segments[0] == start, follower_segments
    assert b3.metric("tierlog_build_remote_log_aux_state_requests_total", topic=TOPIC) >= 1
    assert cluster.epochs(3) == cluster.epochs(1)
    snapshot = b3.log_dir / f"{TOPIC}-0" / f"{start:020d}.snapshot"
    follower_producers = {e.producer_id: e for e in decode_snapshot(snapshot.read_bytes())}
    assert len(follower_producers) == 1
    (entry,) = follower_producers.values()
    assert entry.last_seq == start - 1
    leader_snapshot = cluster.brokers[1].log_dir / f"{TOPIC}-0" / f"{start:020d}.snapshot"
    if leader_snapshot.exists():
        leader_producers = {e.producer_id: e for e in decode_snapshot(leader_snapshot.read_bytes())}
        assert _producers(leader_producers.values()) == _producers(follower_producers.values())
    assert cluster.live_segments() == tiered

    cluster.brokers[1].kill()
    wait_until(lambda: cluster.leader() == 3, 30, what="broker 3 leads")
    producing.send(N)
    assert not producing.errors
    got = _consume_all(cluster.bootstrap(), producing.sent)
    assert got[: producing.sent] == sorted(producing.acked)
    assert [v for _, v in got[: producing.sent]] == [b"v-%05d" % i for i in range(producing.sent)]


def test_leader_killed_mid_copy_leaves_history_tiered_exactly_once(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """Broker 1 leads and its copy of [0-4] is stalled in the RSM after COPY_SEGMENT_STARTED;
    it is killed there. The new leader deletes that dangling copy (as Kafka does), resumes
    from the metadata of its lineage and uploads the history once: every segment is
    COPY_SEGMENT_FINISHED, they cover the history exactly once, the shared tier holds exactly
    them, and every acknowledged record is read back once, in order."""
    cluster = _start(broker_factory, zk_connect, kazoo_client, tmp_path, rsm=STALLING_RSM)
    _create_topic(cluster, [1, 2, 3])
    hold_file(cluster.remote, 1).touch()
    producing = Producing(cluster.bootstrap())
    producing.send(2 * N + 1)
    wait_until(lambda: copying_file(cluster.remote, 1).exists(), 30, what="broker 1 copying")
    stalled = _metadata_segments(cluster)
    assert [(m.start_offset, m.state) for m in stalled] == [
        (0, RemoteLogSegmentState.COPY_SEGMENT_STARTED)
    ]
    cluster.brokers[1].kill()
    hold_file(cluster.remote, 1).unlink()
    wait_until(lambda: cluster.leader() in (2, 3), 30, what="a new leader")
    new_leader = cluster.leader()
    producing.send(N)
    end = wait_until(
        lambda: _tiered_below_active(cluster, (2, 3)),
        60,
        what=f"the history tiered by the new leader; saw {cluster.live_segments()}",
    )

    def settled() -> list[RemoteLogSegmentMetadata] | None:
        segments = _metadata_segments(cluster)
        finished = all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segments)
        return segments if finished else None

    segments = wait_until(settled, 60, what="the dangling copy deleted")
    ranges = [(m.start_offset, m.end_offset) for m in segments]
    assert _covered_once(ranges, end), ranges
    assert sorted(ranges) == cluster.live_segments()
    assert {m.remote_log_segment_id.id for m in segments} == {
        uuid.UUID(e.segment_id)
        for e in cluster.events()
        if e.type == COPY and not e.failed and e.broker_id == new_leader
    } - {uuid.UUID(e.segment_id) for e in cluster.events() if e.type == DELETE}
    dangling = stalled[0].remote_log_segment_id.id
    assert any(e.type == DELETE and uuid.UUID(e.segment_id) == dangling for e in cluster.events())
    got = _consume_all(cluster.bootstrap(), producing.sent)
    assert [v for _, v in got] == [b"v-%05d" % i for i in range(producing.sent)]
    assert [o for o, _ in got] == list(range(producing.sent))
    report = _audit(cluster)
    assert set(report["summary"].values()) == {0}, report["findings"]
    assert report["segments"] == len(segments)


def test_unclean_election_deletes_segments_outside_the_new_lineage(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """Broker 2 holds [0-4] and is down while broker 1 goes on alone and tiers its history
    past 4. Broker 1 dies and broker 2 is elected uncleanly: its lineage ends at 4, so its
    expiration task deletes every remote segment reaching past 4 (those wholly below stay),
    and consumers read the new lineage."""
    cluster = _start(broker_factory, zk_connect, kazoo_client, tmp_path)
    _create_topic(cluster, [1, 2], **{"unclean.leader.election.enable": "true"})
    producing = Producing(cluster.bootstrap())
    producing.send(N)
    wait_until(
        lambda: (s := cluster.state()) is not None and sorted(s.isr) == [1, 2],
        30,
        what="both replicas in sync",
    )
    cluster.brokers[2].kill()
    wait_until(lambda: (s := cluster.state()) is not None and s.isr == (1,), 30, what="ISR {1}")
    producing.send(3 * N + 1)

    def tiered_past_broker_2() -> bool:
        live = cluster.live_segments()
        return bool(live) and live[-1][1] >= 2 * N and _covered_once(live, live[-1][1] + 1)

    wait_until(tiered_past_broker_2, 60, what=f"broker 1 tiered; saw {cluster.live_segments()}")
    kept = [r for r in cluster.live_segments() if r[1] < N]
    old_lineage = {
        m.remote_log_segment_id.id for m in _metadata_segments(cluster) if m.end_offset >= N
    }
    assert old_lineage
    cluster.brokers[1].kill()
    cluster.brokers[2].start()
    wait_until(lambda: cluster.leader() == 2, 60, what="broker 2 elected uncleanly")
    wait_until(
        lambda: cluster.live_segments() == kept,
        60,
        what=f"the cut-off segments deleted; saw {cluster.live_segments()}",
    )
    deleted = {uuid.UUID(e.segment_id) for e in cluster.events() if e.type == DELETE}
    assert old_lineage <= deleted
    producing.errors.clear()
    more = Producing(cluster.bootstrap())
    more.sent = producing.sent
    more.send(N)
    got = _consume_all(cluster.bootstrap(), N + N)
    assert [v for _, v in got[:N]] == [b"v-%05d" % i for i in range(N)]
    assert [v for _, v in got[N : 2 * N]] == [
        b"v-%05d" % i for i in range(producing.sent, producing.sent + N)
    ]


def test_empty_follower_starts_after_the_last_tiered_offset(
    broker_factory: Callable[..., BrokerProcess],
    zk_connect: str,
    kazoo_client: KazooClient,
    tmp_path: Path,
) -> None:
    """KIP-1023 (``follower.fetch.last.tiered.offset.enable``): the leader keeps its tiered
    segments locally too, yet a follower whose log is empty starts after the last tiered
    offset, with its state from the remote tier, instead of fetching them again."""
    cluster = _start(
        broker_factory,
        zk_connect,
        kazoo_client,
        tmp_path,
        extra={"follower.fetch.last.tiered.offset.enable": "true"},
    )
    _create_topic(cluster, [1, 2, 3], **{"local.retention.bytes": "-2"})
    b3 = cluster.brokers[3]
    b3.kill()
    producing = Producing(cluster.bootstrap())
    producing.send(4 * N + 1)

    def tiered_up_to_the_active_segment() -> int | None:
        active = cluster.local_segments(1)[-1]
        return active if active > 0 and _covered_once(cluster.live_segments(), active) else None

    end = wait_until(
        tiered_up_to_the_active_segment,
        60,
        what=f"every rolled segment tiered; saw {cluster.live_segments()}",
    )
    assert cluster.local_segments(1)[0] == 0
    b3.start()
    wait_until(
        lambda: (s := cluster.state()) is not None and sorted(s.isr) == [1, 2, 3],
        60,
        what="broker 3 back in the ISR",
    )
    assert cluster.local_segments(3)[0] == end
    assert cluster.local_segments(2)[0] == 0
    assert cluster.epochs(3) == cluster.epochs(1)


def test_reassigned_replica_bootstraps_from_remote_and_serves_remote_reads(
    cluster: Cluster, tmp_path: Path
) -> None:
    """ReassignReplicaExpand/Move/Shrink: [1, 2] moves to [2, 3] once broker 1 has tiered
    and deleted its local segments. Broker 3, which never held the partition (it has no local
    log of it until it becomes a replica), builds its state from the remote tier instead of
    copying the history; broker 1 leaves. Then broker 3 leads, and a consumer from offset 0
    reads everything through it, the history from the remote tier."""
    _create_topic(cluster, [1, 2])
    producing = Producing(cluster.bootstrap())
    producing.send(4 * N + 1)
    start = wait_until(
        lambda: _tiered_below_active(cluster, (1, 2)), 60, what="the history tiered on [1, 2]"
    )
    assert start >= 2 * N
    tiered = cluster.live_segments()
    assert not (cluster.brokers[3].log_dir / f"{TOPIC}-0").exists()
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3]}]}
        )
    )
    out = run_cli(
        "reassign-partitions",
        "--bootstrap-server",
        cluster.bootstrap(),
        "--reassignment-json-file",
        str(plan),
        "--execute",
    )
    assert out.returncode == 0, out.stderr

    def settled() -> bool:
        a = assignment(cluster.kazoo, TOPIC)
        s = cluster.state()
        return (
            a is not None
            and list(a.partitions[0]) == [2, 3]
            and not a.adding
            and not a.removing
            and s is not None
            and sorted(s.isr) == [2, 3]
        )

    wait_until(settled, 60, what="the reassignment to [2, 3] completed")
    leader = cluster.leader()
    assert leader in (2, 3)
    b3 = cluster.brokers[3]
    assert cluster.local_segments(3)[0] == start
    assert b3.metric("tierlog_build_remote_log_aux_state_requests_total", topic=TOPIC) >= 1
    held = [e for e in cluster.epochs(leader) if e[1] < producing.sent]
    assert cluster.epochs(3) == held, (cluster.epochs(3), cluster.epochs(leader))
    assert cluster.live_segments() == tiered

    cluster.brokers[2].stop()
    wait_until(lambda: cluster.leader() == 3, 30, what="broker 3 leads")
    got = _consume_all(cluster.bootstrap(), producing.sent)
    assert [v for _, v in got] == [b"v-%05d" % i for i in range(producing.sent)]
    assert [o for o, _ in got] == list(range(producing.sent))
    assert b3.metric("tierlog_remote_fetch_requests_total", topic=TOPIC) >= 1


def _tiered_below_active(cluster: Cluster, brokers: Iterable[int]) -> int | None:
    """The local log start of ``brokers`` once each holds only its active segment and the
    shared tier covers every offset below it exactly once. A segment rolls when its time
    index is full, and batches within one millisecond share an entry, so where the segments
    end is not fixed in advance."""
    starts = set()
    for b in brokers:
        local = cluster.local_segments(b)
        if len(local) != 1:
            return None
        starts.add(local[0])
    if len(starts) != 1:
        return None
    (start,) = starts
    return start if start > 0 and _covered_once(cluster.live_segments(), start) else None


def _partition_deletes(cluster: Cluster, topic: str) -> list[tuple[int, str]]:
    """(partition, state) of every partition-delete record of ``topic`` in
    ``__remote_log_metadata``."""
    records = [deserialize(v) for v in _metadata_values(cluster)]
    return [
        (r.topic_id_partition.partition, r.state.name)
        for r in records
        if isinstance(r, RemotePartitionDeleteMetadata) and r.topic_id_partition.topic == topic
    ]


def test_deleting_a_tiered_topic_with_a_replica_offline(cluster: Cluster) -> None:
    """DeleteTopics on a tiered RF=3 topic while follower 3 is stopped: the remote data is
    deleted once (one DELETE_PARTITION_FINISHED, by the leader), the shared tier keeps
    nothing of the topic, the live replicas' local files go at once and broker 3's when it
    comes back."""
    _create_topic(cluster, [1, 2, 3])
    producing = Producing(cluster.bootstrap())
    producing.send(3 * N + 1)
    wait_until(lambda: _tiered_below_active(cluster, (1, 2, 3)), 60, what="the history tiered")
    b3 = cluster.brokers[3]
    b3.stop()
    assert any(cluster.remote.glob(f"{TOPIC}-0-*"))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.delete_topics([TOPIC], operation_timeout=20)[TOPIC].result(30)

    def remote_empty() -> bool:
        return not any(
            p.is_file() for d in cluster.remote.glob(f"{TOPIC}-0-*") for p in d.rglob("*")
        )

    wait_until(remote_empty, 60, what=f"the shared tier emptied of {TOPIC}")
    wait_until(
        lambda: "DELETE_PARTITION_FINISHED" in {s for _, s in _partition_deletes(cluster, TOPIC)},
        60,
        what="DELETE_PARTITION_FINISHED published",
    )
    live = [cluster.brokers[1].log_dir / f"{TOPIC}-0", cluster.brokers[2].log_dir / f"{TOPIC}-0"]
    wait_until(
        lambda: not any(d.exists() for d in live), 30, what="the live replicas' files removed"
    )
    assert (b3.log_dir / f"{TOPIC}-0").is_dir()
    b3.start()
    wait_until(
        lambda: not (b3.log_dir / f"{TOPIC}-0").exists(), 30, what="broker 3's files removed"
    )
    deletes = _partition_deletes(cluster, TOPIC)
    assert [s for _, s in deletes].count("DELETE_PARTITION_FINISHED") == 1, deletes
    assert [s for _, s in deletes].count("DELETE_PARTITION_MARKED") == 1, deletes
    assert {p for p, _ in deletes} == {0}
    deleted = {e.segment_id for e in cluster.events() if e.type == DELETE and not e.failed}
    copied = {e.segment_id for e in cluster.events() if e.type == COPY and not e.failed}
    assert deleted == copied
    assert len([e for e in cluster.events() if e.type == DELETE and not e.failed]) == len(copied)
    assert remote_empty()
