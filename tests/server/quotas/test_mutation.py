"""KIP-599's controller mutation quota: Kafka's token bucket and its strict and permissive
holds (``ControllerMutationQuotaManager``), as ``tierlog.server.quotas.mutation`` keeps them,
and ``ClientQuotas.mutation_quota`` choosing the bucket by KIP-55 precedence."""

from __future__ import annotations

import pytest

from tierlog.protocol.errors import ErrorCode, KafkaError
from tierlog.server.quotas.manager import ClientQuotas
from tierlog.server.quotas.mutation import UNBOUNDED, MutationQuota, TokenBucket


def test_the_bucket_starts_full_refills_at_the_rate_and_caps_at_the_burst() -> None:
    b = TokenBucket(2.0, 5.0, 0)
    assert b.tokens(0) == 10.0, "burst = rate x num x window seconds"
    b.take(14, 0)
    assert b.tokens(0) == -4.0, "a charge may take it below zero"
    assert b.throttle_ms(0) == 2000, "-tokens / rate"
    assert b.tokens(1000) == pytest.approx(-2.0)
    assert b.throttle_ms(1000) == 1000
    assert b.tokens(60_000) == 10.0, "never above the burst"


def test_strict_refuses_only_once_the_bucket_is_below_zero() -> None:
    """Kafka's StrictControllerMutationQuota: a topic accepted while tokens remain is charged
    in full (one large request goes through); the next is refused with the throttle time."""
    q = MutationQuota(TokenBucket(1.0, 2.0, 0), strict=True)
    q.check(0)
    q.record(2, 0)
    q.check(0)
    q.record(3, 0)
    assert q.throttle_ms(0) == 0, "nothing refused yet: no throttle"
    with pytest.raises(KafkaError) as e:
        q.check(0)
    assert e.value.code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert q.throttle_ms(0) == 3000
    assert q.throttle_ms(1000) == 2000, "less the time since it was given"


def test_permissive_does_everything_and_throttles_by_what_is_owed() -> None:
    q = MutationQuota(TokenBucket(1.0, 2.0, 0), strict=False)
    for _ in range(3):
        q.check(0)
        q.record(2, 0)
    assert q.throttle_ms(0) == 4000


def test_mutation_quota_follows_precedence_and_is_unbounded_without_one() -> None:
    quotas = ClientQuotas(2, 1, controller_window=(2, 1))
    assert quotas.mutation_quota("u", "c", True, 0) is UNBOUNDED
    quotas.update("clients/<default>", {"controller_mutation_rate": "1.0"})
    quotas.update("clients/admin", {"controller_mutation_rate": "5.0"})
    admin = quotas.mutation_quota("u", "admin", True, 0)
    admin.record(10, 0)
    admin.check(0)
    admin.record(1, 0)
    with pytest.raises(KafkaError):
        quotas.mutation_quota("u", "admin", True, 0).check(0)
    other = quotas.mutation_quota("u", "other", True, 0)
    other.check(0)
    other.record(3, 0)
    with pytest.raises(KafkaError):
        other.check(0)
    quotas.update("clients/admin", {"controller_mutation_rate": "50.0"})
    quotas.mutation_quota("u", "admin", True, 0).check(0)  # a new bound: a new, full bucket
