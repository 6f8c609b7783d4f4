"""``max.connections.per.ip.overrides``: ``host:count[,host:count...]``, as Kafka reads it.

Each item is split at its last colon, so an IPv6 address needs no brackets (``::1:10``). The
host is an IP address or a name that the broker resolves when it starts. Kafka takes any
integer as a count; a negative one would refuse every connection from that host, which is
never what an operator means, so tierlog refuses it at startup instead.
"""

from __future__ import annotations


def parse_connection_overrides(text: str) -> dict[str, int]:
    """Host -> most connections from it; ``ValueError`` says which item is malformed."""
    out: dict[str, int] = {}
    if not text.strip():
        return out
    for raw in text.split(","):
        item = raw.strip()
        host, colon, count_text = item.rpartition(":")
        host = host.strip()
        if not colon or not host:
            raise ValueError(f"{item!r} is not of the form host:count")
        try:
            count = int(count_text.strip())
        except ValueError:
            raise ValueError(f"{item!r}: {count_text.strip()!r} is not a number") from None
        if count < 0:
            raise ValueError(f"{item!r}: the count must be at least 0")
        out[host] = count
    return out


def connection_overrides_problem(value: object) -> str | None:
    """A validator over ``parse_connection_overrides``."""
    try:
        parse_connection_overrides(str(value))
    except ValueError as e:
        return str(e)
    return None
