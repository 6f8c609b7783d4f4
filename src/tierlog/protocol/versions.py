"""The API versions tierlog advertises, and ApiVersions replies including KIP-511's fallback.

Ranges are chosen so that the four reference clients negotiate versions we have tested:
kcat/librdkafka 2.0.2, confluent-kafka 2.16 (librdkafka 2.16), kafka-python 3.0.12 and
aiokafka 0.14 (see spec/python-kafka-feasibility.md §4). Minimums follow kio (the Kafka 4.0
baseline of KIP-896); maximums stop below versions whose semantics we do not implement
(for example Produce v13 / Metadata v13 / Fetch v18 rely on KIP-848/KIP-932 era fields).
"""

from __future__ import annotations

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_response
from tierlog.protocol.errors import ErrorCode

#: The API versions we serve, per API: (min_version, max_version).
ADVERTISED: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 12),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 5),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.WRITE_TXN_MARKERS: (1, 2),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
}

#: Served in cluster mode only: followers truncate by leader epoch, and consumers validate
#: their positions after a leader change; the controller elects leaders and moves replicas.
#: A single node has none of these.
CLUSTER_ADVERTISED: dict[ApiKey, tuple[int, int]] = {
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
}


#: Lookups by the key read off the wire, which may be one we do not serve.
_RANGES: dict[int, tuple[int, int]] = {
    int(key): rng for key, rng in (ADVERTISED | CLUSTER_ADVERTISED).items()
}
_NAMES: dict[int, str] = {key: key.kafka_name for key in ADVERTISED | CLUSTER_ADVERTISED}


def api_name(api_key: int) -> str:
    """Kafka's name for an API we serve (request metrics are labelled with it)."""
    return _NAMES.get(api_key, f"Unknown{api_key}")


def is_supported(api_key: int, version: int) -> bool:
    """In range for an API of either mode; the router also needs a registered handler."""
    rng = _RANGES.get(api_key)
    return rng is not None and rng[0] <= version <= rng[1]


def advertised_entries(cluster: bool = False) -> list[dict[str, int]]:
    ranges = ADVERTISED | CLUSTER_ADVERTISED if cluster else ADVERTISED
    return [
        {"api_key": int(k), "min_version": lo, "max_version": hi}
        for k, (lo, hi) in sorted(ranges.items())
    ]


def api_versions_fallback(correlation_id: int) -> bytes:
    """KIP-511: a client that sent an ApiVersions version we do not know gets a v0-format
    reply with UNSUPPORTED_VERSION and our ranges, so it can retry with a version we serve."""
    body = mk(
        ApiVersionsResponseV0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=tuple(mk(ApiVersionV0, **e) for e in advertised_entries()),
    )
    return encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body)
