"""The S3 server dies while the broker is uploading: nothing is lost, the broker keeps
serving from the local tier, and tiering resumes once a server is back on the same address.

The broker reaches moto through the latency proxy (the proxy survives, the server process
does not). Manifest PUTs are held back until the kill, so the outage lands between a
segment's ``.log`` upload and its manifest, and no segment can finish on the old server:
moto keeps everything in memory, so the revived server starts empty (a real store would
not), and only segments uploaded after the outage exist on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.helpers.poll import wait_until
from tests.helpers.wire import EARLIEST_LOCAL, LATEST_TIERED
from tests.storage.e2e.objectstore_broker import (
    ObjectStoreBroker,
    expected_records,
    tiered_topic_configs,
)

FIRST, SECOND = 1500, 1000


def test_s3_killed_mid_upload_loses_nothing_and_tiering_resumes_when_it_is_back(
    moto_factory: Callable[..., Any],
    proxy_factory: Callable[..., Any],
    proxy_fault: type,
    s3_bucket_on: Callable[..., dict[str, str]],
    os_broker_factory: Callable[[dict[str, str]], ObjectStoreBroker],
) -> None:
    server = moto_factory()
    proxy = proxy_factory(server.port, latency_s=0.01)
    props = s3_bucket_on(server.endpoint, via=f"http://127.0.0.1:{proxy.port}")
    bucket = props["storage.url"].removeprefix("s3://").split("/", 1)[0]
    props |= {"compression.enabled": "true", "storage.request.timeout.ms": "3000"}
    proxy.inject(proxy_fault("stall", count=10**6, method="PUT", path_contains=".rsm-manifest"))
    b = os_broker_factory(props)
    topic = "os-outage"
    b.create_topic(topic, 1, tiered_topic_configs())

    b.produce(topic, 0, FIRST)
    wait_until(lambda: proxy.log.faults_applied["stall"] >= 1, 60, what="a manifest PUT in flight")
    server.process.kill()
    server.process.wait(10)
    proxy.clear_faults()

    # the copy fails (retriably) and nothing leaves the local tier meanwhile
    wait_until(
        lambda: b.metric("tierlog_remote_copy_errors_total", topic=topic) >= 1,
        60,
        what="a failed copy while the store is down",
    )
    assert b.list_offset(topic, 0, LATEST_TIERED) == -1
    assert b.list_offset(topic, 0, EARLIEST_LOCAL) == 0
    b.produce(topic, 0, SECOND, start=FIRST)  # the broker still takes writes
    during = b.consume(topic, 0, FIRST + SECOND)
    assert not during.errors, during.errors
    assert during.records == expected_records(0, FIRST + SECOND)
    assert b.local_segments(topic, 0)[0] == 0

    revived = moto_factory(server.port)
    s3_bucket_on(revived.endpoint, bucket=bucket)
    b.wait_fully_tiered(topic, 1)
    assert b.list_offset(topic, 0, -2) == 0  # log start: nothing was given up
    after = b.consume(topic, 0, FIRST + SECOND)
    assert not after.errors, after.errors
    assert after.records == expected_records(0, FIRST + SECOND)
    assert b.metric("tierlog_remote_fetch_errors_total", topic=topic) == 0
