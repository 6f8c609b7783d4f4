"""Replica catch-up with and without tiering: the payoff of KIP-405 (issue 13).

A three-broker cluster on a real ZooKeeper shares one directory remote tier. Two RF=3 topics
receive the same history (``--mib``, 1 KiB records) while broker 3 is stopped:
``tiered`` keeps only ``--local-mib`` locally and moves the rest to the remote tier, ``plain``
keeps everything locally. Broker 3 is then started, and the time until it is back in the
partition's ISR is measured. A tiered follower builds its auxiliary state from the remote
tier (leader-epoch checkpoint and producer snapshot) and fetches only the local tail; a plain
one fetches the whole history. The goal: tiered at least 10x faster, in a time that follows
the local tail rather than the history. The two are measured one after the other in one run.

Run: ``python bench/bench_catchup.py [--mib 1024] [--local-mib 64]`` (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_replication import produce
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.zookeeper import ZooKeeperServer
from tierlog.client import WireConnection
from tierlog.cluster import paths
from tierlog.cluster.registration import live_brokers
from tierlog.cluster.znodes import PartitionState
from tierlog.protocol.api_keys import ApiKey

MESSAGE = 1024
SEGMENT = 16 * 1024 * 1024


class Cluster:
    def __init__(self, root: Path) -> None:
        self.zk = ZooKeeperServer(root / "zookeeper", tick_time_ms=500)
        self.zk.start()
        setup = KazooClient(hosts=self.zk.connect)
        setup.start(30)
        setup.ensure_path("/bench")
        setup.stop()
        self.kazoo = KazooClient(hosts=self.zk.connect + "/bench")
        self.kazoo.start(30)
        remote = root / "remote"
        remote.mkdir()
        self.brokers = {
            i: BrokerProcess(
                root / f"broker-{i}",
                overrides={
                    "zookeeper.connect": self.zk.connect + "/bench",
                    "broker.id": str(i),
                    "remote.log.storage.system.enable": "true",
                    "remote.log.storage.manager.class.name": "directory",
                    "rsm.config.dir": str(remote),
                    "remote.log.manager.task.interval.ms": "500",
                    "log.retention.check.interval.ms": "500",
                    "log.segment.delete.delay.ms": "0",
                    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
                    "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
                },
            ).start()
            for i in (1, 2, 3)
        }
        wait_until(lambda: sorted(live_brokers(self.kazoo)) == [1, 2, 3], 30, what="brokers")

    def state(self, topic: str) -> PartitionState | None:
        path = paths.partition_state(topic, 0)
        if self.kazoo.exists(path) is None:
            return None
        return PartitionState.decode(self.kazoo.get(path)[0])

    def in_isr(self, topic: str, broker: int) -> bool:
        s = self.state(topic)
        return s is not None and broker in s.isr

    def create(self, topic: str, configs: dict[str, str]) -> None:
        bootstrap = ",".join(b.bootstrap for b in self.brokers.values())
        with WireConnection.to_bootstrap(bootstrap) as conn:
            r = conn.call(
                ApiKey.CREATE_TOPICS,
                5,
                topics=[
                    {
                        "name": topic,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]}],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                timeout=30000,
                validate_only=False,
            )
        if int(r.topics[0].error_code) not in (0,):
            raise RuntimeError(f"create {topic}: {r.topics[0].error_message}")
        wait_until(lambda: self.in_isr(topic, 3), 30, what=f"{topic} on every broker")

    def close(self) -> None:
        for b in self.brokers.values():
            b.close()
        self.kazoo.stop()
        self.zk.stop()


def local_bytes(broker: BrokerProcess, topic: str) -> int:
    return sum(f.stat().st_size for f in (broker.log_dir / f"{topic}-0").glob("*.log"))


def catch_up(cluster: Cluster, topic: str, count: int, local_limit: int | None) -> float:
    """Stop broker 3, write the history, settle tiering, restart it; seconds to the ISR."""
    third = cluster.brokers[3]
    third.stop(60)
    wait_until(lambda: not cluster.in_isr(topic, 3), 60, what="broker 3 out of the ISR")
    produce(",".join(cluster.brokers[i].bootstrap for i in (1, 2)), count, "all", topic)
    state = cluster.state(topic)
    assert state is not None
    if local_limit is not None:
        leader = cluster.brokers[state.leader]
        wait_until(
            lambda: local_bytes(leader, topic) <= local_limit + 2 * SEGMENT,
            900,
            interval_s=0.5,
            what="the leader's local log down to its tail",
        )
    third.start()
    started = time.monotonic()
    wait_until(lambda: cluster.in_isr(topic, 3), 1800, interval_s=0.05, what="broker 3 in ISR")
    return time.monotonic() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=int(os.environ.get("TIERLOG_BENCH_MIB", "1024")))
    ap.add_argument("--local-mib", type=int, default=64)
    args = ap.parse_args()
    count = args.mib * 1024 * 1024 // MESSAGE
    local = args.local_mib * 1024 * 1024
    root = Path(tempfile.mkdtemp(prefix="tierlog-bench-catchup-"))
    cluster = Cluster(root)
    try:
        common = {"segment.bytes": str(SEGMENT), "min.insync.replicas": "2"}
        cluster.create(
            "tiered",
            {**common, "remote.storage.enable": "true", "local.retention.bytes": str(local)},
        )
        cluster.create("plain", common)
        tiered = catch_up(cluster, "tiered", count, local)
        plain = catch_up(cluster, "plain", count, None)
        third = cluster.brokers[3]
        print(f"== replica catch-up: {args.mib} MiB of history, {args.local_mib} MiB local")
        print(
            f"  tiered topic: {tiered:7.2f} s to join the ISR "
            f"({local_bytes(third, 'tiered') / 2**20:.0f} MiB fetched locally)"
        )
        print(
            f"  plain topic:  {plain:7.2f} s to join the ISR "
            f"({local_bytes(third, 'plain') / 2**20:.0f} MiB fetched)"
        )
        ratio = plain / tiered
        print(f"  speed-up: {ratio:.1f}x (goal >= 10x: {'ok' if ratio >= 10 else 'MISS'})")
    finally:
        cluster.close()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
