"""AlterClientQuotas / DescribeClientQuotas over the wire, as ``kafka-configs.sh`` sends them.

confluent-kafka 2.16 and kafka-python 3.0 have no client-quota admin calls, so the tests
send the requests through tierlog's own blocking client (``tierlog.client``).

* ``alter(bootstrap, entity, set_={key: value}, remove=[key], validate_only=False)``: one
  entry; returns its (error code, error message). ``entity`` maps an entity type (``user``,
  ``client-id``, ``ip``) to a name, or None for the default entity.
* ``alter_entries(bootstrap, entries, validate_only)``: several entries at once.
* ``produce_throttle_ms(host_port, topic, client_id, value_bytes)``: one Produce of one
  record to partition 0 on a new connection; the throttle time its response carries
  (``produce_answer``: with the partition's error code, for a leader not serving yet).
* ``describe(bootstrap, components, strict=False)``: components are (entity type, match
  type, match); returns (error code, error message, {entity: {key: value}}) where an entity
  is a tuple of sorted (type, name or None) pairs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.records import SimpleRecord, build_batch

Entity = tuple[tuple[str, str | None], ...]

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


def _entry(
    entity: Mapping[str, str | None],
    set_: Mapping[str, float] | None = None,
    remove: Iterable[str] = (),
) -> dict[str, Any]:
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in (set_ or {}).items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
    return {
        "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
        "ops": ops,
    }


def alter_entries(
    bootstrap: str, entries: Sequence[dict[str, Any]], validate_only: bool = False
) -> list[tuple[int, str | None]]:
    with WireConnection.to_bootstrap(bootstrap, client_id="kafka-configs") as conn:
        r = conn.call(
            ApiKey.ALTER_CLIENT_QUOTAS, 1, entries=list(entries), validate_only=validate_only
        )
    return [(int(e.error_code), e.error_message) for e in r.entries]


def alter(
    bootstrap: str,
    entity: Mapping[str, str | None],
    set_: Mapping[str, float] | None = None,
    remove: Iterable[str] = (),
    validate_only: bool = False,
) -> tuple[int, str | None]:
    return alter_entries(bootstrap, [_entry(entity, set_, remove)], validate_only)[0]


def entry(
    entity: Mapping[str, str | None],
    set_: Mapping[str, float] | None = None,
    remove: Iterable[str] = (),
) -> dict[str, Any]:
    return _entry(entity, set_, remove)


def describe(
    bootstrap: str,
    components: Sequence[tuple[str, int, str | None]] = (),
    strict: bool = False,
    version: int = 1,
) -> tuple[int, str | None, dict[Entity, dict[str, float]]]:
    with WireConnection.to_bootstrap(bootstrap, client_id="kafka-configs") as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            version,
            components=[
                {"entity_type": t, "match_type": m, "match": name} for t, m, name in components
            ],
            strict=strict,
        )
    found: dict[Entity, dict[str, float]] = {}
    for e in r.entries or ():
        key = tuple(sorted((d.entity_type, d.entity_name) for d in e.entity))
        found[key] = {v.key: float(v.value) for v in e.values}
    return int(r.error_code), r.error_message, found


def produce_answer(
    host_port: tuple[str, int], topic: str, client_id: str, value_bytes: int
) -> tuple[int, int]:
    """(partition error code, throttle ms) of one Produce of one record to partition 0."""
    with WireConnection(*host_port, client_id=client_id) as conn:
        records = build_batch([SimpleRecord(b"v" * value_bytes)], timestamp=int(time.time() * 1000))
        r = conn.call(
            ApiKey.PRODUCE,
            9,
            transactional_id=None,
            acks=1,
            timeout=10_000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
        )
    seconds: float = r.throttle_time.total_seconds()
    return int(r.responses[0].partition_responses[0].error_code), round(seconds * 1000)


def produce_throttle_ms(
    host_port: tuple[str, int], topic: str, client_id: str, value_bytes: int
) -> int:
    code, throttle_ms = produce_answer(host_port, topic, client_id, value_bytes)
    assert code == 0
    return throttle_ms
