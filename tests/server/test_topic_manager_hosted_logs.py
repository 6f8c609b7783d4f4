"""The topic manager in cluster mode defines topics without logs; the replication layer
opens the log of each replica the broker hosts and closes it when the broker stops hosting
it, and a restart recreates none of the others."""

from __future__ import annotations

from pathlib import Path

from tierlog.config.broker import load_broker_config
from tierlog.log import LogConfig, LogManager
from tierlog.log.names import TopicPartition
from tierlog.protocol.records import build_batch
from tierlog.server.topics import TopicManager


def _open(tmp_path: Path, cluster: bool) -> tuple[TopicManager, LogManager]:
    raw = {"log.dirs": str(tmp_path / "data")}
    if cluster:
        raw["zookeeper.connect"] = "127.0.0.1:1"
    cfg = load_broker_config(raw)
    logs = LogManager([tmp_path / "data"], LogConfig())
    topics = TopicManager(cfg, logs, tmp_path)
    logs.load(topics.load())
    topics.attach_logs()
    return topics, logs


def _dirs(tmp_path: Path) -> set[str]:
    return {d.name for d in (tmp_path / "data").iterdir() if d.is_dir()}


def test_a_single_broker_creates_every_partitions_log_with_its_topic(tmp_path: Path) -> None:
    topics, logs = _open(tmp_path, cluster=False)
    topics.create("t", 3)
    assert _dirs(tmp_path) == {"t-0", "t-1", "t-2"}
    topics.create_partitions("t", 4)
    assert topics.get_log("t", 3) is not None
    logs.shutdown()


def test_a_cluster_broker_holds_logs_only_for_the_replicas_it_opens(tmp_path: Path) -> None:
    topics, logs = _open(tmp_path, cluster=True)
    topics.create("t", 3)
    assert topics.get("t") is not None and _dirs(tmp_path) == set()
    assert all(topics.get_log("t", p) is None for p in range(3))
    plog = topics.open_log("t", 1)
    assert plog is not None and topics.open_log("t", 1) is plog
    assert topics.open_log("t", 3) is None and topics.open_log("absent", 0) is None
    plog.append_as_leader(build_batch([b"v"]), leader_epoch=0)
    topics.create_partitions("t", 4)
    info = topics.get("t")
    assert info is not None and info.partitions == 4 and _dirs(tmp_path) == {"t-1"}
    logs.shutdown()

    topics, logs = _open(tmp_path, cluster=True)
    assert _dirs(tmp_path) == {"t-1"}
    reopened = topics.get_log("t", 1)
    assert reopened is not None and reopened.log_end_offset == 1
    gone = topics.close_log("t", 1)
    assert gone is not None and gone.exists() and gone.name.endswith("-delete")
    assert topics.get_log("t", 1) is None and topics.close_log("t", 1) is None
    fresh = topics.open_log("t", 1)
    assert fresh is not None and fresh.log_end_offset == 0
    assert logs.get_log(TopicPartition("t", 1)) is fresh
    logs.shutdown()

    topics, logs = _open(tmp_path, cluster=True)  # a crash before the rmtree: finished on load
    assert _dirs(tmp_path) == {"t-1"}
    logs.shutdown()
