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

from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_response
from tierlog.protocol.errors import ErrorCode

API_KEY_API_VERSIONS = 18

#: api_key -> (min_version, max_version) we serve.
ADVERTISED: dict[int, tuple[int, int]] = {
    0: (3, 12),  # Produce
    1: (4, 17),  # Fetch
    2: (1, 10),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch
    10: (0, 5),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 1),  # DescribeCluster
}

API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
}


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"Unknown{api_key}")


def is_supported(api_key: int, version: int) -> bool:
    rng = ADVERTISED.get(api_key)
    return rng is not None and rng[0] <= version <= rng[1]


def advertised_entries() -> list[dict[str, int]]:
    return [
        {"api_key": k, "min_version": lo, "max_version": hi}
        for k, (lo, hi) in sorted(ADVERTISED.items())
    ]


def api_versions_fallback(correlation_id: int) -> bytes:
    """KIP-511: a client that sent an ApiVersions version we do not know gets a v0-format
    reply with UNSUPPORTED_VERSION and our ranges, so it can retry with a version we serve."""
    body = mk(
        ApiVersionsResponseV0,
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=tuple(mk(ApiVersionV0, **e) for e in advertised_entries()),
    )
    return encode_response(API_KEY_API_VERSIONS, 0, correlation_id, body)
