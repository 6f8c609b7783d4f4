"""The broker's client quotas: every entity's settings, and one windowed rate per client.

``ClientQuotas`` holds the settings of every entity (as Kafka stores them: text values by
key, per entity path) and answers, per quota kind, how long a request must be throttled.
The handlers call it with the connection's principal and the request's client id; the
answer for a (kind, principal, client id) is cached until the settings change, so a request
of a client with no quota costs one dictionary lookup, and one with a quota a few float
operations (``WindowedRate``). A kind no entity sets costs nothing at all (Kafka's
``quotasEnabled``).

Each rate is shared by every connection measured under the same names (``entities.Level``):
two producers with one client id share a ``clients/<id>`` quota, as in Kafka. A rate whose
client went quiet is dropped once it has no live sample (Kafka expires its sensors after
an hour), so the number of rates is bounded by the clients active within a quota window.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import Counter

from tierlog.server.quotas.entities import (
    CONNECTION_CREATION_RATE,
    DEFAULT,
    IPS,
    QuotaKind,
    precedence,
    sanitize,
)
from tierlog.server.quotas.mutation import UNBOUNDED, MutationQuota, TokenBucket
from tierlog.server.quotas.rate import WindowedRate

log = logging.getLogger(__name__)

_PRUNE_EVERY = 1024
"""New rates between two sweeps of the quiet ones."""


@dataclass(frozen=True, slots=True)
class _Resolved:
    bound: float
    rate_key: tuple[QuotaKind, str, str]


@dataclass(frozen=True, slots=True)
class QuotaCounters:
    """Prometheus counters of throttling, labelled by quota kind (``Produce`` ...)."""

    throttle_seconds: Counter
    throttled: Counter


class ClientQuotas:
    def __init__(
        self,
        num_samples: int,
        window_s: int,
        counters: QuotaCounters | None = None,
        controller_window: tuple[int, int] = (11, 1),
    ) -> None:
        """``controller_window``: ``controller.quota.window.num`` and ``.size.seconds``,
        whose product is the burst of a ``controller_mutation_rate`` bucket in seconds."""
        self.num_samples = num_samples
        self.window_ms = window_s * 1000
        self._burst_s = float(controller_window[0] * controller_window[1])
        self._buckets: dict[tuple[QuotaKind, str, str], TokenBucket] = {}
        self._counters = counters
        self._configs: dict[str, dict[str, str]] = {}
        self._bounds: dict[str, dict[QuotaKind, float]] = {}
        self._enabled: frozenset[QuotaKind] = frozenset()
        self._resolved: dict[tuple[QuotaKind, str, str], _Resolved | None] = {}
        self._rates: dict[tuple[QuotaKind, str, str], WindowedRate] = {}
        self._ip_bounds: dict[str, float] = {}
        self._ip_rates: dict[str, WindowedRate] = {}
        self._created = 0

    # ---- settings -------------------------------------------------------------------------
    def replace_all(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Take the whole set of entity settings (at start, after a reload)."""
        self._configs = {}
        self._bounds = {}
        for path, config in configs.items():
            self._set(path, config)
        self._changed()

    def update(self, path: str, config: Mapping[str, str]) -> None:
        """One entity's settings changed (empty: it has none left)."""
        self._set(path, config)
        self._changed()

    def configs(self) -> dict[str, dict[str, str]]:
        """Every entity's settings, a copy."""
        return {path: dict(config) for path, config in self._configs.items()}

    def config(self, path: str) -> dict[str, str]:
        return dict(self._configs.get(path, {}))

    def _set(self, path: str, config: Mapping[str, str]) -> None:
        self._configs.pop(path, None)
        self._bounds.pop(path, None)
        if not config:
            return
        self._configs[path] = dict(config)
        bounds: dict[QuotaKind, float] = {}
        for kind in QuotaKind:
            text = config.get(kind.value)
            if text is None:
                continue
            try:
                value = float(text)
            except ValueError:
                log.error("ignoring %s=%r of %s: not a number", kind.value, text, path)
                continue
            if value > 0:
                bounds[kind] = value
        if bounds:
            self._bounds[path] = bounds

    def _changed(self) -> None:
        self._resolved.clear()
        self._ip_bounds = {}
        for path, config in self._configs.items():
            text = config.get(CONNECTION_CREATION_RATE)
            if not path.startswith(f"{IPS}/") or text is None:
                continue
            try:
                self._ip_bounds[path[len(IPS) + 1 :]] = float(text)
            except ValueError:
                log.error(
                    "ignoring %s=%r of %s: not a number", CONNECTION_CREATION_RATE, text, path
                )
        self._enabled = frozenset(k for bounds in self._bounds.values() for k in bounds)

    # ---- enforcement ----------------------------------------------------------------------
    def enabled(self, kind: QuotaKind) -> bool:
        return kind in self._enabled

    def quota(self, kind: QuotaKind, user: str, client_id: str) -> float | None:
        """The bound that applies to this client, None for none."""
        resolved = self._resolve(kind, user, client_id)
        return None if resolved is None else resolved.bound

    def _resolve(self, kind: QuotaKind, user: str, client_id: str) -> _Resolved | None:
        key = (kind, user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        found: _Resolved | None = None
        for level in precedence(user, client_id):
            bound = self._bounds.get(level.path, {}).get(kind)
            if bound is not None:
                found = _Resolved(bound, (kind, *level.measured_as))
                break
        self._resolved[key] = found
        return found

    def record(
        self, kind: QuotaKind, user: str, client_id: str, value: float, now_ms: float
    ) -> int:
        """Record ``value`` (bytes, or percent-seconds of the loop for REQUEST) for the
        client; the throttle time in ms it earns (0 when within its quota or it has none)."""
        if kind not in self._enabled:
            return 0
        resolved = self._resolve(kind, user, client_id)
        if resolved is None:
            return 0
        rate = self._rate(resolved.rate_key)
        rate.record(value, now_ms)
        throttle = rate.throttle_ms(resolved.bound, now_ms)
        if kind is QuotaKind.REQUEST:
            throttle = min(throttle, self.window_ms)
        return throttle

    def unrecord(
        self, kind: QuotaKind, user: str, client_id: str, value: float, now_ms: float
    ) -> None:
        """Take back a recorded value: a throttled Fetch returns nothing, so what it would
        have returned must not count (Kafka's ``unrecordQuotaSensor``)."""
        resolved = self._resolve(kind, user, client_id) if kind in self._enabled else None
        if resolved is not None:
            self._rate(resolved.rate_key).record(-value, now_ms)

    def max_in_window(self, kind: QuotaKind, user: str, client_id: str) -> int | None:
        """The most one response may carry without being throttled for sure: the bound over
        ``num - 1`` windows (Kafka's ``getMaxValueInQuotaWindow``); None when unbounded."""
        if kind not in self._enabled:
            return None
        bound = self.quota(kind, user, client_id)
        if bound is None:
            return None
        return int(min(bound * (self.num_samples - 1) * self.window_ms / 1000, 2**31 - 1))

    def mutation_quota(
        self, user: str, client_id: str, strict: bool, now_ms: float
    ) -> MutationQuota:
        """KIP-599: the request's hold on its client's ``controller_mutation_rate`` bucket
        (strict for the versions that know THROTTLING_QUOTA_EXCEEDED), or the unbounded
        quota when none applies. A bucket is made full on first use and kept per measured
        level, as the rates are; a changed bound starts a new full bucket."""
        kind = QuotaKind.CONTROLLER_MUTATION
        if kind not in self._enabled:
            return UNBOUNDED
        resolved = self._resolve(kind, user, client_id)
        if resolved is None:
            return UNBOUNDED
        bucket = self._buckets.get(resolved.rate_key)
        if bucket is None or bucket.rate != resolved.bound:
            if len(self._buckets) >= _PRUNE_EVERY:
                self._prune_buckets(now_ms)
            bucket = TokenBucket(resolved.bound, self._burst_s, now_ms)
            self._buckets[resolved.rate_key] = bucket
        return MutationQuota(bucket, strict)

    def _prune_buckets(self, now_ms: float) -> None:
        """Drop the buckets that have been full for a while: a new one starts full too."""
        for key, bucket in list(self._buckets.items()):
            if now_ms - bucket.last_ms >= self._burst_s * 1000 and bucket.tokens(now_ms) >= 0:
                del self._buckets[key]

    def connection_throttle_ms(self, ip: str, now_ms: float) -> int:
        """KIP-612: count a new connection from ``ip`` (canonical text) against its
        ``connection_creation_rate``; the time to hold it before closing it when that takes
        the rate over (at most one window, as Kafka), else 0. A refused connection does not
        count."""
        if not self._ip_bounds:
            return 0
        sanitized = sanitize(ip)
        bound = self._ip_bounds.get(sanitized, self._ip_bounds.get(DEFAULT))
        if bound is None:
            return 0
        rate = self._ip_rates.get(sanitized)
        if rate is None:
            if len(self._ip_rates) >= _PRUNE_EVERY:
                self._prune_ips(now_ms)
            rate = self._ip_rates[sanitized] = WindowedRate(self.num_samples, self.window_ms)
        rate.record(1, now_ms)
        throttle = rate.throttle_ms(bound, now_ms)
        if throttle <= 0:
            return 0
        rate.record(-1, now_ms)
        return min(throttle, self.window_ms)

    def _prune_ips(self, now_ms: float) -> None:
        horizon = self.num_samples * self.window_ms
        for key, rate in list(self._ip_rates.items()):
            if now_ms - rate.last_ms >= horizon:
                del self._ip_rates[key]

    def throttled(self, kind: QuotaKind, throttle_ms: int) -> None:
        """Count a response throttled for ``kind``."""
        if self._counters is not None and throttle_ms > 0:
            self._counters.throttled.labels(kind.label).inc()
            self._counters.throttle_seconds.labels(kind.label).inc(throttle_ms / 1000)

    def _rate(self, key: tuple[QuotaKind, str, str]) -> WindowedRate:
        rate = self._rates.get(key)
        if rate is None:
            self._created += 1
            if self._created % _PRUNE_EVERY == 0:
                self._prune()
            rate = self._rates[key] = WindowedRate(self.num_samples, self.window_ms)
        return rate

    def _prune(self) -> None:
        """Drop the rates whose last sample has expired: they measure nothing any more."""
        horizon = self.num_samples * self.window_ms
        newest = max((r.last_ms for r in self._rates.values()), default=0.0)
        for key, rate in list(self._rates.items()):
            if newest - rate.last_ms >= horizon:
                del self._rates[key]

    @property
    def rates(self) -> int:
        """How many client rates are kept now."""
        return len(self._rates)
