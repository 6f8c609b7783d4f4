"""Scenario 2: the object store goes away under load, and misbehaves (latency proxy faults).

The broker reaches moto only through the latency proxy; the outage closes the proxy's
listener and aborts its connections (the endpoint refuses connections, as a dead S3
endpoint does), and the store "returns" when a new proxy listens on the same port with
moto's data intact. During the outage:

* producing continues (acks=all, every record acknowledged);
* local retention keeps every segment that is not uploaded yet;
* copy fails, is retried, and catches up once the store is back;
* a cold read fails fast with an error (or, past ``remote.fetch.max.wait.ms``, is answered
  empty as Kafka answers an expired remote fetch), hot reads are served.

Then 503 SlowDown, connection resets and slow responses are injected while producing, and
tiering must absorb them. At the end every acknowledged record is read back, value i at
offset i, from both tiers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.reliability.rel_helpers import (
    consume_all,
    index_of,
    must_create_topic,
    produce_values,
    record,
    scale,
    wire_fetch,
)
from tests.reliability.s3_env import (
    Bucket,
    ServerProcess,
    latency_proxy_module,
    metric,
    tiered_overrides,
    tiered_topic_configs,
)
from tierlog.client import WireConnection
from tierlog.protocol.errors import ErrorCode

TOPIC = "outage"
PER_ROUND = 500


class Store:
    """The proxy in front of moto, which can be taken down and brought back on its port."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        self.proxy: Any = latency_proxy_module.LatencyProxy(
            "127.0.0.1", upstream_port, latency_s=0.0
        )
        self.port = int(self.proxy.start())
        self.up = True

    def down(self) -> None:
        self.proxy.stop()
        self.up = False

    def back(self) -> None:
        self.proxy = latency_proxy_module.LatencyProxy(
            "127.0.0.1", self._upstream, latency_s=0.0, listen_port=self.port
        )
        self.proxy.start()
        self.up = True

    def close(self) -> None:
        if self.up:
            self.proxy.stop()


@pytest.fixture
def store(moto: ServerProcess) -> Iterator[Store]:
    s = Store(moto.port)
    yield s
    s.close()


def _local_segments(b: BrokerProcess) -> list[int]:
    return sorted(int(p.stem) for p in (b.log_dir / f"{TOPIC}-0").glob("*.log"))


def _copy_lag(b: BrokerProcess) -> float:
    return metric(b.metrics_url, "tierlog_remote_copy_lag_segments", topic=TOPIC)


@pytest.mark.timeout(scale(300, 900))
def test_object_store_outage_and_faults(
    broker_factory: Callable[..., BrokerProcess], moto: ServerProcess, store: Store
) -> None:
    outage_s = scale(8.0, 90.0)
    bucket = Bucket.create(moto.endpoint)
    b = broker_factory(tiered_overrides(bucket, f"http://127.0.0.1:{store.port}"))
    must_create_topic(b.bootstrap, TOPIC, 1, tiered_topic_configs())
    produced = 0
    produce_values(b.bootstrap, TOPIC, range(0, 3000), pad=200)
    produced = 3000
    wait_until(lambda: _local_segments(b)[0] > 0, 60, interval_s=0.2, what="first upload")
    cold_offset = 0
    # ---- outage ------------------------------------------------------------------------
    copy_errors_before = metric(b.metrics_url, "tierlog_remote_copy_errors_total", topic=TOPIC)
    segments_before = len(_local_segments(b))
    store.down()
    t_down = time.monotonic()
    cold: list[tuple[str, float]] = []
    hot_ok = 0
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        while time.monotonic() - t_down < outage_s:
            produce_values(b.bootstrap, TOPIC, range(produced, produced + PER_ROUND), pad=200)
            produced += PER_ROUND
            err, recs = wire_fetch(c, TOPIC, produced - 10)
            assert err == 0 and recs, ErrorCode(err)
            assert recs[0][0] <= produced - 10 <= recs[-1][0]
            hot_ok += 1
            t0 = time.monotonic()
            err, recs = wire_fetch(c, TOPIC, cold_offset)
            cold.append((ErrorCode(err).name, time.monotonic() - t0))
            # an error, or (Kafka's DelayedRemoteFetch expiring after remote.fetch.max.wait.ms
            # on a loaded machine) an empty answer: never records
            assert not recs, f"a cold read returned records with the store down ({cold[-1]})"
    assert b.running
    assert any(e != ErrorCode.NONE.name for e, _ in cold), cold  # the failure is reported
    grown = len(_local_segments(b))
    assert grown > segments_before, (segments_before, grown)
    assert _local_segments(b)[0] <= produced  # untiered data kept locally
    copy_errors = (
        metric(b.metrics_url, "tierlog_remote_copy_errors_total", topic=TOPIC) - copy_errors_before
    )
    assert copy_errors >= 1
    # ---- the store returns ---------------------------------------------------------------
    store.back()
    t_back = time.monotonic()
    wait_until(lambda: _copy_lag(b) == 0, 120, interval_s=0.2, what="copy to catch up")
    wait_until(lambda: len(_local_segments(b)) <= 2, 60, interval_s=0.2, what="local cleanup")
    catch_up_s = time.monotonic() - t_back
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        err, recs = wire_fetch(c, TOPIC, cold_offset)
        assert err == 0 and recs and index_of(recs[0][1] or b"") == 0
    # ---- throttling, resets, slowness while producing ------------------------------------
    fault = latency_proxy_module.Fault
    injected = scale(6, 40)
    store.proxy.inject(fault("503", count=injected))
    store.proxy.inject(fault("reset", count=injected))
    store.proxy.inject(fault("slow", count=injected, delay_s=0.5))
    t_faults = time.monotonic()
    while sum(store.proxy.log.faults_applied.values()) < 3 * injected:
        assert time.monotonic() - t_faults < 180, dict(store.proxy.log.faults_applied)
        produce_values(b.bootstrap, TOPIC, range(produced, produced + PER_ROUND), pad=200)
        produced += PER_ROUND
    wait_until(lambda: _copy_lag(b) == 0, 120, interval_s=0.2, what="copy after faults")
    faults_s = time.monotonic() - t_faults
    # ---- nothing lost, nothing duplicated, in order --------------------------------------
    everything = consume_all(b.bootstrap, TOPIC, 0, produced, timeout_s=180)
    assert [o for o, _ in everything] == list(range(produced))
    assert all(index_of(v) == o for o, v in everything)
    assert b.running
    cold_latencies = [t for _, t in cold]
    record(
        "store.outage",
        outage_s=outage_s,
        records_acknowledged=produced,
        records_lost=0,
        produced_during_outage=produced - 3000,
        hot_reads_ok=hot_ok,
        cold_read_errors=sorted({e for e, _ in cold}),
        cold_read_fail_s_max=round(max(cold_latencies), 3),
        copy_errors_during_outage=copy_errors,
        local_segments_before_after=[segments_before, grown],
        catch_up_s=round(catch_up_s, 2),
        faults_injected={"503": injected, "reset": injected, "slow_0.5s": injected},
        faults_absorbed_s=round(faults_s, 2),
    )
    assert max(cold_latencies) < 10, cold_latencies
