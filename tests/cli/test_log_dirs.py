"""``tierlog log-dirs --describe`` (Kafka's ``kafka-log-dirs.sh``): the two lines Kafka
prints, then its JSON, whose partition sizes must be the bytes the broker holds on disk."""

from __future__ import annotations

import json
from typing import Any

import confluent_kafka as ck
import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import run_cli
from tierlog.cli import main
from tierlog.client import WireConnection

TOPIC = "sized"


def _describe(bootstrap: str, *args: str) -> tuple[list[str], dict[str, Any]]:
    r = run_cli("log-dirs", "--bootstrap-server", bootstrap, "--describe", *args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    return lines[:2], json.loads(lines[2])


def test_describe_reports_each_partition_of_a_topic_with_its_size_on_disk(
    module_broker: BrokerProcess,
) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as conn:
        assert conn.create_topic(TOPIC, 2)[0] == 0
        assert conn.create_topic("other", 1)[0] == 0
    producer = ck.Producer({"bootstrap.servers": module_broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        producer.produce(TOPIC, b"x" * 100 * (i + 1), partition=0)
    producer.produce(TOPIC, b"y", partition=1)
    assert producer.flush(30) == 0

    head, described = _describe(module_broker.bootstrap, "--topic-list", TOPIC)
    assert head == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 0",
    ]
    assert described["version"] == 1
    (broker,) = described["brokers"]
    assert broker["broker"] == 0
    (log_dir,) = broker["logDirs"]
    assert log_dir["logDir"] == str(module_broker.log_dir.resolve())
    assert log_dir["error"] is None
    on_disk = {
        f"{TOPIC}-{p}": sum(
            f.stat().st_size for f in (module_broker.log_dir / f"{TOPIC}-{p}").glob("*.log")
        )
        for p in (0, 1)
    }
    assert on_disk[f"{TOPIC}-0"] > on_disk[f"{TOPIC}-1"] > 0
    assert log_dir["partitions"] == [
        {"partition": name, "size": size, "offsetLag": 0, "isFuture": False}
        for name, size in sorted(on_disk.items())
    ]

    _, everything = _describe(module_broker.bootstrap)
    names = {p["partition"] for p in everything["brokers"][0]["logDirs"][0]["partitions"]}
    assert {f"{TOPIC}-0", f"{TOPIC}-1", "other-0"} <= names


def test_describe_of_a_broker_not_in_the_cluster_fails(module_broker: BrokerProcess) -> None:
    r = run_cli(
        "log-dirs",
        "--bootstrap-server",
        module_broker.bootstrap,
        "--describe",
        "--broker-list",
        "0,7",
    )
    assert r.returncode == 1
    assert (
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent "
        "brokers: 0" in r.stderr
    )


def test_describe_is_required() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["log-dirs", "--bootstrap-server", "127.0.0.1:1"])
    assert exited.value.code == 'tierlog: Missing required argument "[describe]"'
