"""Tiered-storage quotas: copies are back-pressured, remote reads over the rate are shed,
and the fetch quota set as a dynamic broker config applies to a running broker.

Both quotas use two 1 s windows, so the measured rate is bytes over about one second and a
few 735-byte segments are enough to exceed 1000 B/s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.poll import wait_until
from tests.tiered.e2e.e2e_helpers import (
    N,
    TieredBroker,
    consume_confluent,
    recipe,
    segments_of,
    tiered_broker,
    value_of,
)
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey

QUOTA = "1000"


@pytest.fixture(scope="module")
def throttled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TieredBroker]:
    with tiered_broker(
        tmp_path_factory.mktemp("throttled"),
        {
            "remote.log.manager.copy.max.bytes.per.second": QUOTA,
            "remote.log.manager.copy.quota.window.num": "2",
            "remote.log.manager.copy.quota.window.size.seconds": "1",
            "remote.log.manager.fetch.max.bytes.per.second": QUOTA,
            "remote.log.manager.fetch.quota.window.num": "2",
            "remote.log.manager.fetch.quota.window.size.seconds": "1",
        },
    ) as tb:
        yield tb


def test_copy_quota_throttles_uploads_without_losing_any(throttled: TieredBroker) -> None:
    topic = "quota-copy"
    segments = 6
    throttled.create_topic(topic, 1, recipe())
    assert throttled.metric("tierlog_remote_copy_throttle_time_ms_count") == 0
    throttled.produce(topic, range(segments * N + 1))
    throttled.wait_segs(topic, "COPY", segments_of(segments), timeout_s=60)
    assert throttled.metric("tierlog_remote_copy_throttle_time_ms_count") > 0
    assert throttled.metric("tierlog_remote_copy_throttle_time_ms_sum") > 0
    assert throttled.metric("tierlog_remote_copy_errors_total", topic=topic) == 0


def test_fetch_quota_sheds_remote_reads_but_the_consumer_gets_everything(
    throttled: TieredBroker,
) -> None:
    topic = "quota-fetch"
    segments = 6
    throttled.create_topic(topic, 1, recipe())
    throttled.produce(topic, range(segments * N + 1))
    throttled.wait_segs(topic, "COPY", segments_of(segments), timeout_s=60)
    wait_until(
        lambda: throttled.local_segments(topic) == [segments * N], 30, what="local tier emptied"
    )
    assert throttled.metric("tierlog_remote_fetch_throttle_time_ms_count") == 0
    got = consume_confluent(throttled.bootstrap, topic, segments * N + 1)
    assert got == [(i, value_of(i)) for i in range(segments * N + 1)]
    assert throttled.metric("tierlog_remote_fetch_throttle_time_ms_count") > 0
    assert throttled.metric("tierlog_remote_fetch_errors_total", topic=topic) == 0


def test_a_fetch_quota_set_live_sheds_remote_reads(tmp_path: Path) -> None:
    """KIP-956's quota as a dynamic broker config: no quota at start, then
    ``remote.log.manager.fetch.max.bytes.per.second`` set on the running broker sheds the
    remote reads of the next consumer, which still gets every record."""
    topic = "quota-live"
    segments = 6
    with tiered_broker(tmp_path / "live") as tb:
        tb.create_topic(topic, 1, recipe())
        tb.produce(topic, range(segments * N + 1))
        tb.wait_segs(topic, "COPY", segments_of(segments), timeout_s=60)
        wait_until(lambda: tb.local_segments(topic) == [segments * N], 30, what="local emptied")
        assert tb.metric("tierlog_remote_fetch_throttle_time_ms_count") == 0
        with WireConnection.to_bootstrap(tb.bootstrap) as conn:
            r = conn.call(
                ApiKey.INCREMENTAL_ALTER_CONFIGS,
                1,
                resources=[
                    {
                        "resource_type": 4,
                        "resource_name": "0",
                        "configs": [
                            {
                                "name": "remote.log.manager.fetch.max.bytes.per.second",
                                "config_operation": 0,
                                "value": QUOTA,
                            }
                        ],
                    }
                ],
                validate_only=False,
            )
        assert int(r.responses[0].error_code) == 0, r.responses[0].error_message
        got = consume_confluent(tb.bootstrap, topic, segments * N + 1)
        assert got == [(i, value_of(i)) for i in range(segments * N + 1)]
        assert tb.metric("tierlog_remote_fetch_throttle_time_ms_count") > 0
