"""Connection limits: ``max.connections``, ``max.connections.per.ip`` and its overrides, and
the ``ip`` entity's ``connection_creation_rate`` client quota (KIP-612).

A connection is counted from the moment it is accepted until it is lost. One over a limit is
closed right after the accept, before any byte of it is read, and counted in
``tierlog_connections_refused_total`` with the limit that refused it. For the per-IP limits
this is Kafka's behaviour. For ``max.connections`` Kafka instead stops accepting until a
connection closes, leaving new ones in the listen backlog; an asyncio server cannot pause its
accepts, so tierlog closes the extra connection and the client reconnects after its back-off.

Addresses are compared in their canonical text form, with an IPv4-mapped IPv6 address read as
its IPv4 address (a dual-stack listener sees IPv4 clients that way). Host names in the
overrides are resolved once, when the broker starts, as Kafka does; a name that does not
resolve stops the start-up.

A connection admitted by those limits is then counted against its IP's
``connection_creation_rate`` (``ips/<ip>``, else ``ips/<default>``, set with
AlterClientQuotas). One that takes the rate over it is held unread for the throttle time
(at most one quota window) and then closed, as Kafka's acceptor does, and counted with the
reason ``connection_creation_rate``; it does not count against the rate.

Before all of these, ``max.connection.creation.rate`` bounds the rate at which the broker
accepts connections at all (KIP-612's broker-wide limit; tierlog serves one listener, which
Kafka does not exempt as an inter-broker listener when it is the only one). Kafka's acceptor
records each connection in a windowed rate (``quota.window.*``) and, when that takes the rate
over the bound, blocks for the throttle time before accepting it and the ones after it. The
asyncio server accepts at once, so the same schedule is kept in ``accept_delay_ms``: a
connection is held unread until the time Kafka's blocked acceptor would have accepted it,
then served (not closed). The held time is counted in
``tierlog_connection_accept_throttle_seconds_total``. A bound of 0 refuses every new
connection, counted with the reason ``max_connection_creation_rate`` (Kafka's acceptor would
block for good).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections.abc import Callable, Mapping

from prometheus_client import Counter

from tierlog.config.broker import BrokerConfig
from tierlog.config.connection_quotas import parse_connection_overrides
from tierlog.config.definitions import INT_MAX, ConfigError
from tierlog.server.quotas.rate import WindowedRate

log = logging.getLogger(__name__)

OVERRIDES_KEY = "max.connections.per.ip.overrides"
CREATION_RATE_KEY = "max.connection.creation.rate"

ResolvedLimits = tuple[int, int, Mapping[str, int], int]
"""``max.connections``, ``max.connections.per.ip``, the per-IP overrides keyed by canonical
address, and ``max.connection.creation.rate``."""


def canonical_ip(address: str) -> str:
    """``address`` in the form the limits compare (text that is no IP address is kept)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Per-IP limits keyed by canonical address; every address of a host name gets its count."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            ipaddress.ip_address(host)
            addresses = [host]
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
            except OSError as e:
                raise ConfigError(OVERRIDES_KEY, f"cannot resolve host {host!r}: {e}") from None
            addresses = [str(info[4][0]) for info in infos]
        for address in addresses:
            out[canonical_ip(address)] = count
    return out


class ConnectionLimits:
    """Counts open connections per address and says whether a new one may stay."""

    def __init__(
        self,
        limits: ResolvedLimits,
        quota_window: tuple[int, int],
        refused: Counter,
        accept_throttle: Counter,
    ) -> None:
        """``refused`` is the Prometheus counter of refused connections, labelled ``reason``;
        ``accept_throttle`` counts the seconds connections were held by the broker-wide
        creation rate; ``quota_window`` is (``quota.window.num``, its size in ms)."""
        self._max, self._max_per_ip, overrides, self._creation_bound = limits
        self._overrides = dict(overrides)
        self._refused_total = refused.labels("max_connections")
        self._refused_per_ip = refused.labels("max_connections_per_ip")
        self._refused_rate = refused.labels("connection_creation_rate")
        self._refused_broker_rate = refused.labels("max_connection_creation_rate")
        self._accept_throttle = accept_throttle
        self._accepted = WindowedRate(*quota_window)
        self._acceptor_free_ms = 0.0
        self._per_ip: dict[str, int] = {}
        self._total = 0
        #: KIP-612's per-IP ``connection_creation_rate`` (``ClientQuotas``): given an address
        #: and the time in ms, how long to hold a new connection before closing it (0: keep).
        self.creation_rate: Callable[[str, float], int] | None = None

    @classmethod
    def from_config(
        cls, cfg: BrokerConfig, refused: Counter, accept_throttle: Counter
    ) -> ConnectionLimits:
        window = (
            int(cfg.get("quota.window.num")),
            int(cfg.get("quota.window.size.seconds")) * 1000,
        )
        return cls(cls.resolved_from(cfg), window, refused, accept_throttle)

    @staticmethod
    def resolved_from(cfg: BrokerConfig) -> ResolvedLimits:
        """The limits of ``cfg`` with the override host names resolved (blocking: a name
        lookup); ``ConfigError`` names a host that does not resolve."""
        overrides = parse_connection_overrides(str(cfg.get(OVERRIDES_KEY)))
        return (
            int(cfg.get("max.connections")),
            int(cfg.get("max.connections.per.ip")),
            resolve_overrides(overrides),
            int(cfg.get(CREATION_RATE_KEY)),
        )

    def update(self, limits: ResolvedLimits) -> None:
        """New limits (a dynamic change). Open connections stay: as in Kafka, a lowered
        limit refuses new connections until enough of the old ones have closed."""
        self._max, self._max_per_ip, overrides, self._creation_bound = limits
        self._overrides = dict(overrides)

    def accept_delay_ms(self, now_ms: float) -> int | None:
        """How long to hold a connection accepted at ``now_ms`` before serving it, so that
        the broker accepts at most ``max.connection.creation.rate`` per second over the
        quota window (0: serve it now; None: the bound is 0, close it). Kafka records the
        connection when its acceptor comes to it, and blocks for the throttle time that
        recording gives before accepting it; the next connection is looked at only then."""
        bound = self._creation_bound
        if bound >= INT_MAX:
            return 0
        if bound == 0:
            self._refused_broker_rate.inc()
            return None
        start = max(now_ms, self._acceptor_free_ms)
        self._accepted.record(1, start)
        self._acceptor_free_ms = start + self._accepted.throttle_ms(bound, start)
        delay = round(self._acceptor_free_ms - now_ms)
        if delay > 0:
            self._accept_throttle.inc(delay / 1000)
        return delay

    @property
    def total(self) -> int:
        return self._total

    def admit(self, address: str) -> bool:
        """Count a just-accepted connection from ``address``, or refuse it (False: the caller
        closes it and must not call ``release``)."""
        ip = canonical_ip(address)
        limit = self._overrides.get(ip, self._max_per_ip)
        count = self._per_ip.get(ip, 0)
        if count >= limit:
            self._refused_per_ip.inc()
            log.info("refused a connection from %s: it already has %d (max %d)", ip, count, limit)
            return False
        if self._total >= self._max:
            self._refused_total.inc()
            log.info("refused a connection from %s: %d connections open (max)", ip, self._total)
            return False
        self._per_ip[ip] = count + 1
        self._total += 1
        return True

    def creation_throttle_ms(self, address: str) -> int:
        """How long to hold an admitted connection from ``address`` before closing it unread
        because its IP opens connections faster than its ``connection_creation_rate``
        (Kafka's acceptor delays the close by the throttle time, so a client that retries
        at once is slowed down too); 0 to serve it."""
        if self.creation_rate is None:
            return 0
        ip = canonical_ip(address)
        throttle = self.creation_rate(ip, time.monotonic() * 1000)
        if throttle > 0:
            self._refused_rate.inc()
            log.info(
                "closing a connection from %s in %d ms: connection_creation_rate", ip, throttle
            )
        return throttle

    def release(self, address: str) -> None:
        """An admitted connection from ``address`` is gone."""
        ip = canonical_ip(address)
        left = self._per_ip.get(ip, 0) - 1
        if left > 0:
            self._per_ip[ip] = left
        else:
            self._per_ip.pop(ip, None)
        self._total = max(0, self._total - 1)
