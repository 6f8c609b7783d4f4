"""The replication throttles' inputs: Kafka's throttled-replicas topic configs (``*`` or
``partition:broker`` entries) and the rate a quota measures (Kafka's SimpleRate)."""

from __future__ import annotations

import pytest

from tierlog.config.definitions import LONG_MAX, ConfigError
from tierlog.config.topic import parse_topic_overrides
from tierlog.replication.quota import ALL_PARTITIONS, ReplicationQuota, throttled_partitions

KEY = "leader.replication.throttled.replicas"


@pytest.mark.parametrize("value", ["", "*", "0:1", "0:1,1:2, 2:1"])
def test_valid_throttled_replicas(value: str) -> None:
    assert KEY in parse_topic_overrides({KEY: value})


@pytest.mark.parametrize("value", ["0", "*,0:1", "a:1", "0:1:2", "0:-1"])
def test_invalid_throttled_replicas_name_the_key(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_topic_overrides({KEY: value})
    assert info.value.key == KEY and "partitionId:brokerId" in str(info.value)


def test_the_partitions_named_for_this_broker() -> None:
    assert throttled_partitions(["0:1", "1:2", "2:1"], 1) == frozenset({0, 2})
    assert throttled_partitions(["*"], 7) is ALL_PARTITIONS
    assert throttled_partitions([], 1) == frozenset()


def test_a_quota_is_exceeded_while_the_windowed_rate_is_above_the_bound() -> None:
    now = [0]
    quota = ReplicationQuota(1000, num_windows=11, window_s=1, clock_ms=lambda: now[0])
    quota.mark_throttled("t", frozenset({0}))
    assert quota.is_throttled("t", 0) and not quota.is_throttled("t", 1)
    quota.record(900)
    assert not quota.is_exceeded()
    quota.record(200)
    assert quota.is_exceeded()  # 1100 bytes over at least one window
    now[0] = 2000
    assert not quota.is_exceeded()  # 1100 bytes over 2 s
    quota.update_bound(LONG_MAX)
    quota.record(10**9)
    assert not quota.is_exceeded()
