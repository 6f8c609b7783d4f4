"""``tierlog get-offsets`` (Kafka's ``kafka-get-offsets.sh``) and ``tierlog delete-records``
(``kafka-delete-records.sh``) run as an operator runs them against a real broker.

``tools`` has three partitions with 3, 4 and 5 records; in partition 0 the records carry
the timestamps ``STAMPS`` (the largest in the middle), so max-timestamp and a timestamp
lookup each have one right answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from tests.cli.groups_helpers import create_topic
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import run_cli

TOPIC = "tools"
COUNTS = {0: 3, 1: 4, 2: 5}
STAMPS = [1_000_000, 5_000_000, 3_000_000]


@pytest.fixture(scope="module")
def bootstrap(module_broker: BrokerProcess) -> Iterator[str]:
    create_topic(module_broker.bootstrap, TOPIC, len(COUNTS))
    producer = confluent_kafka.Producer({"bootstrap.servers": module_broker.bootstrap})
    for p, n in COUNTS.items():
        for i in range(n):
            producer.produce(TOPIC, b"x", partition=p, timestamp=STAMPS[i] if p == 0 else 0)
    assert producer.flush(30) == 0
    yield module_broker.bootstrap


def offsets(bootstrap: str, *args: str) -> list[str]:
    r = run_cli("get-offsets", "--bootstrap-server", bootstrap, "--topic", TOPIC, *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_get_offsets_prints_latest_earliest_and_by_time(bootstrap: str) -> None:
    assert offsets(bootstrap) == ["tools:0:3", "tools:1:4", "tools:2:5"]
    assert offsets(bootstrap, "--time", "-2", "--partitions", "0,2") == ["tools:0:0", "tools:2:0"]
    assert offsets(bootstrap, "--time", "max-timestamp", "--partitions", "0") == ["tools:0:1"]
    assert offsets(bootstrap, "--time", str(STAMPS[2]), "--partitions", "0") == ["tools:0:1"]
    r = run_cli("get-offsets", "--bootstrap-server", bootstrap, "--topic-partitions", "to.ls:1-")
    assert r.stdout.split() == ["tools:1:4", "tools:2:5"]


def test_get_offsets_refuses_what_matches_nothing(bootstrap: str) -> None:
    r = run_cli("get-offsets", "--bootstrap-server", bootstrap, "--topic", "no-such-topic")
    assert r.returncode == 1
    assert "Error occurred: Could not match any topic-partitions with the specified filters" in (
        r.stderr
    )
    r = run_cli("get-offsets", "--bootstrap-server", bootstrap, "--time", "yesterday")
    assert r.returncode == 1 and "Malformed time argument yesterday" in r.stderr


def _plan(tmp_path: Path, entries: list[tuple[int, int]]) -> Path:
    path = tmp_path / "offsets.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [{"topic": TOPIC, "partition": p, "offset": o} for p, o in entries],
            }
        )
    )
    return path


def test_delete_records_moves_the_log_start_offsets(bootstrap: str, tmp_path: Path) -> None:
    """An offset, and -1 for the high watermark; the log start offsets reported after are
    what ListOffsets earliest answers. An offset past the end is refused (exit 1)."""
    plan = _plan(tmp_path, [(1, 2), (2, -1)])
    r = run_cli("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(plan))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        f"partition: {TOPIC}-1\tlow_watermark: 2",
        f"partition: {TOPIC}-2\tlow_watermark: {COUNTS[2]}",
    ]
    assert offsets(bootstrap, "--time", "earliest", "--partitions", "1,2") == [
        "tools:1:2",
        f"tools:2:{COUNTS[2]}",
    ]
    past = run_cli(
        "delete-records",
        "--bootstrap-server",
        bootstrap,
        "--offset-json-file",
        str(_plan(tmp_path, [(1, 99)])),
    )
    assert past.returncode == 1
    assert f"partition: {TOPIC}-1\terror: OFFSET_OUT_OF_RANGE" in past.stdout


def test_delete_records_refuses_a_partition_named_twice(bootstrap: str, tmp_path: Path) -> None:
    plan = _plan(tmp_path, [(0, 1), (0, 2)])
    r = run_cli("delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", str(plan))
    assert r.returncode == 1
    assert f"Offset json file contains duplicate topic partitions: {TOPIC}-0" in r.stderr
    assert offsets(bootstrap, "--time", "earliest", "--partitions", "0") == ["tools:0:0"]
