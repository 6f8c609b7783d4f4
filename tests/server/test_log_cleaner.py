"""The cleaner's per-partition dirty ratio, exported by the broker and shown by the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck

from tests.clients.real_clients import create_topic
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until


def _describe(b: BrokerProcess, topic: str, *extra: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tierlog",
            "topics",
            "describe",
            "--bootstrap-server",
            b.bootstrap,
            "--topic",
            topic,
            *extra,
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _partitions(b: BrokerProcess, topic: str, *extra: str) -> dict[int, dict[str, Any]]:
    d = json.loads(_describe(b, topic, "--json", *extra))
    return {p["partition"]: p for p in d["partitions"]}


def test_describe_shows_each_compacted_partitions_dirty_ratio(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    # the cleaner is off, so the sealed segments stay dirty: partition 0's ratio is exactly 1
    broker = broker_factory({"log.cleaner.enable": "false"})
    create_topic(
        broker.bootstrap,
        "table",
        partitions=2,
        configs={"cleanup.policy": "compact", "segment.bytes": "1024"},
    )
    create_topic(broker.bootstrap, "plain", partitions=1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(60):
        p.produce("table", key=b"k%d" % (i % 5), value=b"v" * 100, partition=0)
        p.produce("plain", key=b"k", value=b"v", partition=0)
        p.flush(10)
    assert p.flush(10) == 0

    def sealed() -> bool:
        text = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()
        return 'tierlog_log_cleaner_dirty_ratio{partition="0",topic="table"} 1.0' in text

    wait_until(sealed, 30, what="partition 0 has sealed, uncleaned segments")
    parts = _partitions(broker, "table", "--metrics-url", broker.metrics_url)
    assert parts[0]["dirty_ratio"] == 1.0
    assert parts[1]["dirty_ratio"] == 0.0, "only an empty active segment: nothing dirty"
    text = _describe(broker, "table", "--metrics-url", broker.metrics_url)
    assert "DirtyRatio: 1.0000" in text and "DirtyRatio: 0.0000" in text
    assert "DirtyRatio: unknown" in _describe(broker, "table")
    assert _partitions(broker, "table")[0]["dirty_ratio"] is None
    plain = _partitions(broker, "plain", "--metrics-url", broker.metrics_url)
    assert plain[0]["dirty_ratio"] is None
    assert "DirtyRatio" not in _describe(broker, "plain", "--metrics-url", broker.metrics_url)
