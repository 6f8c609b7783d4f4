"""KIP-599's ``controller_mutation_rate``: partitions created or deleted per second.

A client's mutations are measured in a token bucket (Kafka's ``TokenBucket`` stat), not in
the windowed rate of the other quotas: the bucket holds at most
``controller.quota.window.num`` x ``controller.quota.window.size.seconds`` seconds of the
rate (the burst), fills at the rate, and each created or deleted partition takes one token;
it may go below zero, and a client whose bucket is below zero is over its quota until the
bucket has filled back to zero (``-tokens / rate`` seconds, the throttle time).

How a request is held to it depends on its version, as in Kafka:

* **strict** (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+, whose clients know
  THROTTLING_QUOTA_EXCEEDED): a topic is refused with that error while the bucket is below
  zero, and the response carries the throttle time; a topic that is accepted is charged in
  full even when that takes the bucket below zero, so one large request always goes through;
* **permissive** (older versions): every topic is done and charged, and the response is
  throttled by what the bucket owes afterwards.

tierlog charges a topic once its creation, growth or deletion succeeded (Kafka charges it
just before the write, so a write that then fails is charged too); ``validate_only``
requests are never charged.
"""

from __future__ import annotations

from tierlog.protocol.errors import ErrorCode, KafkaError

THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class TokenBucket:
    """One client's mutation bucket: starts full, refilled at ``rate`` per second up to the
    burst of ``burst_s`` seconds of it."""

    __slots__ = ("_burst", "_tokens", "last_ms", "rate")

    def __init__(self, rate: float, burst_s: float, now_ms: float) -> None:
        self.rate = rate
        self._burst = rate * burst_s
        self._tokens = self._burst
        self.last_ms = now_ms

    def tokens(self, now_ms: float) -> float:
        elapsed_s = max(now_ms - self.last_ms, 0.0) / 1000
        self._tokens = min(self._burst, self._tokens + self.rate * elapsed_s)
        self.last_ms = max(now_ms, self.last_ms)
        return self._tokens

    def take(self, permits: float, now_ms: float) -> None:
        self._tokens = min(self._burst, self.tokens(now_ms) - permits)

    def throttle_ms(self, now_ms: float) -> int:
        """The time until the bucket is back at zero (0 when it is not below)."""
        tokens = self.tokens(now_ms)
        return round(-tokens / self.rate * 1000) if tokens < 0 else 0


class MutationQuota:
    """One request's hold on its client's bucket (Kafka's strict and permissive
    ``ControllerMutationQuota``); ``bucket`` None when the client has no such quota."""

    __slots__ = ("_bucket", "_strict", "_throttle_at", "_throttle_ms")

    def __init__(self, bucket: TokenBucket | None, strict: bool) -> None:
        self._bucket = bucket
        self._strict = strict
        self._throttle_ms = 0
        self._throttle_at = 0.0

    def check(self, now_ms: float) -> None:
        """Before a topic's mutation: refuse it (strict) while the bucket is below zero."""
        bucket = self._bucket
        if bucket is None or not self._strict:
            return
        throttle = bucket.throttle_ms(now_ms)
        if throttle > 0:
            self._throttled(throttle, now_ms)
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)

    def record(self, permits: int, now_ms: float) -> None:
        """A topic's mutation of ``permits`` partitions was done: charge it."""
        bucket = self._bucket
        if bucket is None or permits <= 0:
            return
        bucket.take(permits, now_ms)
        if not self._strict:
            throttle = bucket.throttle_ms(now_ms)
            if throttle > 0:
                self._throttled(throttle, now_ms)

    def throttle_ms(self, now_ms: float) -> int:
        """The response's throttle time: the last one this request earned, less the time
        since (the request may have waited for the controller's writes since)."""
        return max(0, round(self._throttle_ms - (now_ms - self._throttle_at)))

    def _throttled(self, throttle: int, now_ms: float) -> None:
        self._throttle_ms = throttle
        self._throttle_at = now_ms


UNBOUNDED = MutationQuota(None, False)
"""The quota of a client no ``controller_mutation_rate`` applies to."""
