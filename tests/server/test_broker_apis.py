"""Broker APIs over the wire with our own codec: ListOffsets specials and timestamps,
DeleteRecords, acks=0, InitProducerId persistence, Metadata auto-creation, metrics, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

import confluent_kafka as ck

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import SimpleRecord, build_batch


def _create(c: WireConnection, name: str, partitions: int = 1, **configs: str) -> None:
    r = c.call(
        ApiKey.CREATE_TOPICS,
        7,
        topics=[
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
        ],
        timeout=10_000,
        validate_only=False,
    )
    assert int(r.topics[0].error_code) == 0, r.topics[0].error_message


def _list_offset(c: WireConnection, topic: str, ts: int, version: int = 7) -> tuple[int, int, int]:
    r = c.call(
        ApiKey.LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}],
            }
        ],
    )
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.offset), int(p.timestamp)


def _produce_with_timestamps(b: BrokerProcess, topic: str, timestamps: list[int]) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i, ts in enumerate(timestamps):
        p.produce(topic, value=b"%d" % i, partition=0, timestamp=ts)
        p.flush(10)  # one batch per record, so every timestamp is its own batch max
    assert p.flush(10) == 0


def test_list_offsets_specials_and_timestamps(module_broker: BrokerProcess) -> None:
    base = 1_700_000_000_000
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        _create(c, "lo-t")
        _produce_with_timestamps(module_broker, "lo-t", [base, base + 10, base + 30, base + 20])
        assert _list_offset(c, "lo-t", -2) == (0, 0, -1)
        assert _list_offset(c, "lo-t", -1) == (0, 4, -1)
        assert _list_offset(c, "lo-t", -3) == (0, 2, base + 30)
        assert _list_offset(c, "lo-t", base + 5) == (0, 1, base + 10)
        assert _list_offset(c, "lo-t", base + 25)[1] == 2
        assert _list_offset(c, "lo-t", base + 31) == (0, -1, -1)
        # -4 (earliest local) needs v8 and -5 (latest tiered) needs v9
        assert _list_offset(c, "lo-t", -4, version=7)[0] == ErrorCode.UNSUPPORTED_VERSION
        assert _list_offset(c, "lo-t", -4, version=8) == (0, 0, -1)
        assert _list_offset(c, "lo-t", -5, version=9)[:2] == (0, -1)
        assert _list_offset(c, "no-such-topic", -1)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_records_moves_log_start(module_broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        _create(c, "dr-t")
        _produce_with_timestamps(module_broker, "dr-t", [1, 2, 3, 4, 5])

        def delete(offset: int) -> tuple[int, int]:
            r = c.call(
                ApiKey.DELETE_RECORDS,
                2,
                topics=[{"name": "dr-t", "partitions": [{"partition_index": 0, "offset": offset}]}],
                timeout=5000,
            )
            p = r.topics[0].partitions[0]
            return int(p.error_code), int(p.low_watermark)

        assert delete(3) == (0, 3)
        assert _list_offset(c, "dr-t", -2)[1] == 3
        assert delete(99)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert delete(-1) == (0, 5)


def test_acks_zero_gets_no_response_but_is_appended(module_broker: BrokerProcess) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        _create(c, "acks0-t")
    p = ck.Producer({"bootstrap.servers": module_broker.bootstrap, "acks": 0, "linger.ms": 0})
    for i in range(50):
        p.produce("acks0-t", value=b"%d" % i, partition=0)
    assert p.flush(10) == 0
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        wait_until(lambda: _list_offset(c, "acks0-t", -1)[1] == 50, 10, what="50 records")


def test_producer_ids_are_unique_across_restarts(broker: BrokerProcess) -> None:
    def allocate() -> int:
        with WireConnection.to_bootstrap(broker.bootstrap) as c:
            r = c.call(
                ApiKey.INIT_PRODUCER_ID,
                4,
                transactional_id=None,
                transaction_timeout=60000,
                producer_id=-1,
                producer_epoch=-1,
            )
            assert int(r.error_code) == 0
            return int(r.producer_id)

    first = [allocate() for _ in range(3)]
    assert len(set(first)) == 3
    broker.restart(kill=True)
    after = allocate()
    assert after > max(first)


def test_metadata_auto_create_follows_broker_switch(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    on = broker_factory({"auto.create.topics.enable": "true", "num.partitions": "3"})
    with WireConnection.to_bootstrap(on.bootstrap) as c:
        r = c.call(ApiKey.METADATA, 12, topics=[{"name": "auto-t"}], allow_auto_topic_creation=True)
        assert int(r.topics[0].error_code) == 0
        assert len(r.topics[0].partitions) == 3
        r = c.call(
            ApiKey.METADATA, 12, topics=[{"name": "auto-u"}], allow_auto_topic_creation=False
        )
        assert int(r.topics[0].error_code) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    off = broker_factory()  # tests default: auto.create.topics.enable=false
    with WireConnection.to_bootstrap(off.bootstrap) as c:
        r = c.call(ApiKey.METADATA, 12, topics=[{"name": "auto-t"}], allow_auto_topic_creation=True)
        assert int(r.topics[0].error_code) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _scrape(b: BrokerProcess) -> str:
    with urllib.request.urlopen(b.metrics_url + "/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def test_metrics_endpoint_reports_requests_bytes_and_partitions(
    module_broker: BrokerProcess,
) -> None:
    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        _create(c, "metrics-t")
    _produce_with_timestamps(module_broker, "metrics-t", [1, 2, 3])
    text = _scrape(module_broker)
    assert 'tierlog_requests_total{api="Produce"}' in text
    assert 'tierlog_request_latency_seconds_bucket{api="Metadata"' in text
    assert "tierlog_bytes_in_total" in text
    assert "tierlog_bytes_out_total" in text
    assert 'tierlog_log_end_offset{partition="0",topic="metrics-t"} 3.0' in text
    assert 'tierlog_log_start_offset{partition="0",topic="metrics-t"} 0.0' in text
    assert 'tierlog_log_size_bytes{partition="0",topic="metrics-t"}' in text
    # The process-wide registry is bridged in: the storage plugin's own collectors (the
    # embedded default is the object-store plugin) and the process collector.
    assert "tierlog_objectstore_corrupt_data_total" in text
    assert "process_resident_memory_bytes" in text


def test_cli_topics_round_trip(module_broker: BrokerProcess) -> None:
    def cli(*args: str) -> str:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "tierlog",
                "topics",
                *args,
                "--bootstrap-server",
                module_broker.bootstrap,
            ],
            capture_output=True,
            check=False,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    cli("create", "--topic", "cli-t", "--partitions", "2", "--config", "retention.ms=60000")
    assert "cli-t" in cli("list").split()
    _produce_with_timestamps(module_broker, "cli-t", [int(time.time() * 1000)] * 2)
    d = json.loads(cli("describe", "--topic", "cli-t", "--json"))
    assert [p["partition"] for p in d["partitions"]] == [0, 1]
    p0 = d["partitions"][0]
    assert {k: p0[k] for k in ("partition", "log_start_offset", "high_watermark")} == {
        "partition": 0,
        "log_start_offset": 0,
        "high_watermark": 2,
    }
    # Not tiered: nothing uploaded, and the local start is the log start (ListOffsets -4/-5).
    assert (p0["local_log_start_offset"], p0["latest_tiered_offset"]) == (0, -1)
    assert d["configs"]["retention.ms"] == "60000"
    assert d["config_sources"]["retention.ms"] == "DYNAMIC_TOPIC_CONFIG"
    cli(
        "alter-config",
        "--topic",
        "cli-t",
        "--set",
        "retention.bytes=123456",
        "--delete",
        "retention.ms",
    )
    d = json.loads(cli("describe", "--topic", "cli-t", "--json"))
    assert d["configs"]["retention.bytes"] == "123456"
    assert d["config_sources"]["retention.ms"] == "DEFAULT_CONFIG"
    cli("delete", "--topic", "cli-t")
    assert "cli-t" not in cli("list").split()


def test_fetch_max_bytes_caps_a_response_whatever_the_request_asks(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({"fetch.max.bytes": "4096"})
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        _create(c, "capped")
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for i in range(20):
        p.produce("capped", value=bytes([i]) * 1000, partition=0)
        p.flush(10)  # one ~1 KB batch per record
    assert p.flush(10) == 0
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        err, first = c.fetch_raw("capped", 0, 0, max_bytes=1 << 30)
        assert err == 0
        assert 3000 < len(first) <= 4096  # whole batches within the broker's cap
        big = b"x" * 6000
        p.produce("capped", value=big, partition=0)
        assert p.flush(10) == 0
        err, alone = c.fetch_raw("capped", 0, 20, max_bytes=1 << 30)
        assert err == 0 and big in alone  # one batch larger than the cap still comes back


def test_produce_with_two_batches_for_one_partition_is_an_invalid_record(
    module_broker: BrokerProcess,
) -> None:
    # Kafka refuses it from Produce v3 on; an idempotent producer's sequence checks assume
    # one batch per partition and request
    def batch(seq: int) -> bytes:
        return build_batch(
            [SimpleRecord(b"v%d" % i) for i in range(5)],
            producer_id=1000,
            producer_epoch=0,
            base_sequence=seq,
        )

    with WireConnection.to_bootstrap(module_broker.bootstrap) as c:
        _create(c, "two-batches")
        r = c.call(
            ApiKey.PRODUCE,
            9,
            transactional_id=None,
            acks=-1,
            timeout=10_000,
            topic_data=[
                {
                    "name": "two-batches",
                    "partition_data": [{"index": 0, "records": batch(0) + batch(5)}],
                }
            ],
        )
        part = r.responses[0].partition_responses[0]
        assert int(part.error_code) == ErrorCode.INVALID_RECORD
        assert _list_offset(c, "two-batches", -1)[1] == 0  # nothing appended
