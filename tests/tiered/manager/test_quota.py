"""Spec §5.7: Kafka's throttle arithmetic for the tiered-storage quotas."""

from __future__ import annotations

import threading

from tierlog.tiered.manager.quota import ByteRateQuota, QuotaConfig


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_throttle_follows_kafka_simple_rate_arithmetic() -> None:
    clock = FakeClock()
    quota = ByteRateQuota(QuotaConfig(50, num_windows=11, window_size_seconds=1), clock)
    assert quota.throttle_time_ms() == 0
    quota.record(500)
    clock.now += 1000
    assert quota.throttle_time_ms() == 9000
    clock.now += 8000
    assert quota.throttle_time_ms() == 1000
    clock.now += 1000
    assert quota.throttle_time_ms() == 0


def test_update_quota_changes_only_the_bound() -> None:
    clock = FakeClock()
    quota = ByteRateQuota(QuotaConfig(50), clock)
    quota.record(51)
    assert quota.throttle_time_ms() > 0
    quota.update_quota(60)
    assert quota.throttle_time_ms() == 0
    quota.update_quota(40)
    assert quota.throttle_time_ms() > 0
    assert quota.bytes_per_second == 40


def test_samples_expire_after_all_windows() -> None:
    clock = FakeClock()
    quota = ByteRateQuota(QuotaConfig(10, num_windows=3, window_size_seconds=1), clock)
    quota.record(1000)
    assert quota.throttle_time_ms() > 0
    clock.now += 3000
    assert quota.throttle_time_ms() == 0
    assert quota.rate() == 0


def test_records_roll_into_new_samples_per_window() -> None:
    clock = FakeClock()
    quota = ByteRateQuota(QuotaConfig(1000, num_windows=2, window_size_seconds=1), clock)
    quota.record(100)
    clock.now += 1000
    quota.record(100)
    clock.now += 1000
    # the first sample expired (2 windows); only the second remains, 1 s old
    assert quota.rate() == 100


def test_concurrent_records_are_not_lost() -> None:
    clock = FakeClock()
    quota = ByteRateQuota(QuotaConfig(1e12), clock)

    def work() -> None:
        for _ in range(1000):
            quota.record(1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert quota.rate() == 4000
