"""Failed copy runs back off exponentially per partition (remote.log.manager.task.retry.*)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlm_helpers import make_stack

from tierlog.config import load_broker_config
from tierlog.storage.directory import COPY
from tierlog.tiered.manager import RemoteLogManagerConfig
from tierlog.tiered.manager.backoff import RetryBackoff


def test_delays_double_from_the_initial_value_up_to_the_maximum() -> None:
    b = RetryBackoff(500, 30_000, 0.0)
    delays = [b.failed(0) for _ in range(9)]
    assert delays == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]
    assert b.failures == 9 and not b.ready(29_999) and b.ready(30_000)
    b.succeeded()
    assert b.ready(0) and b.failures == 0
    assert b.failed(100) == 500  # a new streak starts from the initial delay


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 800), (0.5, 1_000), (1.0, 1_200)])
def test_jitter_spreads_the_delay_both_ways(rand: float, expected: int) -> None:
    b = RetryBackoff(1_000, 30_000, 0.2, rand=lambda: rand)
    assert b.failed(0) == expected


def test_broker_keys_reach_the_manager_config() -> None:
    broker = load_broker_config(
        {
            "remote.log.manager.task.retry.backoff.ms": "250",
            "remote.log.manager.task.retry.backoff.max.ms": "4000",
            "remote.log.manager.task.retry.jitter": "0.0",
        }
    )
    c = RemoteLogManagerConfig.from_broker_config(broker)
    assert (c.retry_backoff_ms, c.retry_backoff_max_ms, c.retry_jitter) == (250, 4_000, 0.0)


def test_a_failed_copy_holds_back_scheduled_runs_until_its_back_off_ends(tmp_path: Path) -> None:
    st = make_stack(tmp_path, rlm_overrides={"retry_backoff_ms": 3_600_000, "retry_jitter": 0.0})
    try:
        st.produce(10, per_segment=10)
        st.rsm.inject_faults(fail_copy=1)
        scheduled = st.rlm.tasks_of(st.tp)["copy"]
        scheduled.run_once()  # what the scheduler calls at each tick
        assert [e.failed for e in st.rsm.events(COPY)] == [True]
        scheduled.run_once()
        scheduled.run_once()
        assert len(st.rsm.events(COPY)) == 1  # the ticks inside the back-off did nothing
        assert st.metric("tierlog_remote_copy_errors_total") == 1
        st.rlm.run_now(st.tp, "copy")  # an explicit run is not held back
        assert st.finished() == [(0, 9)]
    finally:
        st.close()


def test_with_a_zero_back_off_the_next_tick_retries_and_later_segments_follow(
    tmp_path: Path,
) -> None:
    st = make_stack(tmp_path, rlm_overrides={"retry_backoff_ms": 0, "retry_jitter": 0.0})
    try:
        st.produce(10, per_segment=10)
        st.rsm.inject_faults(fail_copy=1)
        scheduled = st.rlm.tasks_of(st.tp)["copy"]
        scheduled.run_once()  # fails; a zero back-off lets the next tick retry
        scheduled.run_once()
        assert st.finished() == [(0, 9)]
        st.produce(10, per_segment=10)
        scheduled.run_once()
        assert st.finished() == [(0, 9), (10, 19)]
        assert [e.failed for e in st.rsm.events(COPY)] == [True, False, False]
    finally:
        st.close()
