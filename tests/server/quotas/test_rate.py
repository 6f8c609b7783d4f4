"""Kafka's windowed rate and throttle time (``SampledStat``/``Rate``, ``QuotaUtils``), on a
clock the test moves: the burst of ``num - 1`` windows, the throttle that brings the rate
back to the bound, samples expiring, and a throttled Fetch's bytes taken back."""

from __future__ import annotations

from tierlog.server.quotas.entities import QuotaKind
from tierlog.server.quotas.manager import ClientQuotas
from tierlog.server.quotas.rate import WindowedRate


def test_a_new_client_is_measured_over_num_minus_one_windows() -> None:
    rate = WindowedRate(11, 1000)
    rate.record(10_000, 0)
    assert rate.measure(0) == (1000.0, 10_000.0)
    assert rate.throttle_ms(1000, 0) == 0  # ten seconds of the rate: the burst allowed
    rate.record(1_000, 0)
    # (1100 - 1000) / 1000 x 10 s
    assert rate.throttle_ms(1000, 0) == 1000


def test_the_window_grows_with_the_oldest_sample_and_samples_expire() -> None:
    rate = WindowedRate(2, 1000)
    rate.record(500, 0)
    rate.record(500, 1500)  # a second sample
    value, window = rate.measure(1500)
    assert window == 1500 and value == 1000 * 1000 / 1500
    # at 2000 ms the first sample is num x window old: gone; the second is 500 ms old,
    # less than num - 1 whole windows, so one window is added
    value, window = rate.measure(2000)
    assert window == 1500 and value == 500 * 1000 / 1500


def test_waiting_out_the_throttle_brings_the_rate_to_the_bound() -> None:
    rate = WindowedRate(11, 1000)
    rate.record(30_000, 0)
    throttle = rate.throttle_ms(1000, 0)
    assert throttle == 20_000
    # with nothing more recorded, after the throttle time the rate is at most the bound:
    # the first sample has expired by then; at 10.5 s it is still there and over
    assert rate.measure(10_500)[0] > 1000
    assert rate.measure(float(throttle))[0] <= 1000


def test_quota_precedence_and_shared_rates() -> None:
    quotas = ClientQuotas(2, 1)
    quotas.replace_all(
        {
            "clients/<default>": {"producer_byte_rate": "100"},
            "users/<default>": {"consumer_byte_rate": "200"},
            "users/alice/clients/<default>": {"producer_byte_rate": "300"},
            "users/alice/clients/app": {"producer_byte_rate": "400"},
        }
    )
    produce, fetch = QuotaKind.PRODUCE, QuotaKind.FETCH
    assert quotas.quota(produce, "alice", "app") == 400
    assert quotas.quota(produce, "alice", "other") == 300
    assert quotas.quota(produce, "bob", "app") == 100
    assert quotas.quota(fetch, "bob", "app") == 200
    assert not quotas.enabled(QuotaKind.REQUEST)
    assert quotas.record(QuotaKind.REQUEST, "bob", "app", 1e9, 0) == 0
    # users/<default> is one rate per user, shared by its client ids
    assert quotas.record(fetch, "bob", "a", 200, 0) == 0
    assert quotas.record(fetch, "bob", "b", 200, 0) == 1000
    assert quotas.record(fetch, "carol", "a", 200, 0) == 0
    # a throttled fetch's bytes are taken back
    quotas.unrecord(fetch, "bob", "b", 200, 0)
    assert quotas.record(fetch, "bob", "b", 0, 0) == 0
    assert quotas.max_in_window(fetch, "bob", "x") == 200
    quotas.update("users/<default>", {})
    assert quotas.quota(fetch, "bob", "app") is None and not quotas.enabled(fetch)


def test_request_throttle_is_at_most_one_window() -> None:
    quotas = ClientQuotas(11, 1)
    quotas.replace_all({"clients/busy": {"request_percentage": "1.0"}})
    assert quotas.record(QuotaKind.REQUEST, "u", "busy", 50_000.0, 0) == 1000


def test_connection_creation_rate_per_ip() -> None:
    quotas = ClientQuotas(2, 1)
    quotas.replace_all(
        {
            "ips/<default>": {"connection_creation_rate": "2"},
            "ips/10.0.0.1": {"connection_creation_rate": "1"},
        }
    )
    assert [quotas.connection_throttle_ms("1.1.1.1", 0) for _ in range(2)] == [0, 0]
    assert quotas.connection_throttle_ms("1.1.1.1", 0) == 500  # (3 - 2) / 2 x 1 s
    assert quotas.connection_throttle_ms("1.1.1.1", 0) == 500  # the refused one did not count
    assert quotas.connection_throttle_ms("10.0.0.1", 0) == 0
    assert quotas.connection_throttle_ms("10.0.0.1", 0) == 1000  # at most one window
    quotas.replace_all({})
    assert quotas.connection_throttle_ms("1.1.1.1", 0) == 0
