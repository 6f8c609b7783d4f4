"""DescribeLogDirs (API 35) on a single node: each partition replica in the log dir with its
local size, offset lag 0 and ``is_future_key`` false, the disk's total and usable bytes from
v4, only the named partitions when topics are given; read with kafka-python's admin client
and raw requests (confluent-kafka's AdminClient has no describe_log_dirs)."""

from __future__ import annotations

import os
import shutil

import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey


def _setup(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dirs", 2, 1)])["dirs"].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        producer.produce("dirs", b"x" * 100, partition=i % 2)
    assert producer.flush(30) == 0


def test_describe_log_dirs_v4_over_the_wire(broker: BrokerProcess) -> None:
    _setup(broker)
    with WireConnection.to_bootstrap(broker.bootstrap) as conn:
        r = conn.call(ApiKey.DESCRIBE_LOG_DIRS, 4, topics=None)
        named = conn.call(
            ApiKey.DESCRIBE_LOG_DIRS,
            4,
            topics=[{"topic": "dirs", "partitions": [1, 7]}, {"topic": "nope", "partitions": [0]}],
        )
    assert r.error_code == 0
    (result,) = r.results
    assert result.error_code == 0
    assert result.log_dir == os.path.abspath(broker.log_dir)
    usage = shutil.disk_usage(broker.log_dir)
    assert result.total_bytes == usage.total
    assert 0 < result.usable_bytes <= usage.total
    topics = {t.name: t for t in result.topics}
    parts = {p.partition_index: p for p in topics["dirs"].partitions}
    assert sorted(parts) == [0, 1]
    for index, p in parts.items():
        on_disk = sum(f.stat().st_size for f in (broker.log_dir / f"dirs-{index}").glob("*.log"))
        assert p.partition_size == on_disk > 0
        assert p.offset_lag == 0 and p.is_future_key is False
    (only,) = named.results
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in only.topics] == [
        ("dirs", [1])
    ]


def test_describe_log_dirs_with_kafka_python(broker: BrokerProcess) -> None:
    _setup(broker)
    admin = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.describe_log_dirs()
    finally:
        admin.close()
    (entry,) = answer
    (log_dir,) = entry["log_dirs"]
    assert log_dir["log_dir"] == os.path.abspath(broker.log_dir)
    assert log_dir["error_code"] == 0
    topics = {t["name"]: t for t in log_dir["topics"]}
    sizes = {p["partition_index"]: p["partition_size"] for p in topics["dirs"]["partitions"]}
    assert sorted(sizes) == [0, 1] and all(size > 0 for size in sizes.values())
