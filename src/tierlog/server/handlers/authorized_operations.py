"""KIP-430 authorized operations: what a client may do with a topic, a group or the cluster.

Metadata (``include_topic_authorized_operations``, and ``include_cluster_authorized_operations``
in v8-v10), DescribeCluster and DescribeGroups (v3+) carry an int32 bit field in which bit *n*
set means "``AclOperation`` with code *n* is allowed". A client that did not ask gets
``NOT_REQUESTED`` (Integer.MIN_VALUE), which clients read as "unknown", never as bit 31.

tierlog has no authorizer yet. Kafka without an authorizer answers every operation that
ACLs can name for the resource type (``AclEntry.supportedOperations``), and so does
``authorized_operations``: it is the single place an authorizer replaces, with the set the
principal is allowed instead of ``SUPPORTED_OPERATIONS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Final


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes: the bit positions of the authorized-operations field."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class ResourceType(IntEnum):
    """Kafka's ACL ``ResourceType`` codes, for the resources these APIs describe."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4


NOT_REQUESTED: Final = -(2**31)

#: ``AclEntry.supportedOperations`` for the resource types above. Groups lack Kafka 4's
#: DESCRIBE_CONFIGS / ALTER_CONFIGS because tierlog serves no group configs.
SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, frozenset[AclOperation]]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
}


def bit_field(operations: Iterable[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit ``op`` set for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


def authorized_operations(resource_type: ResourceType, requested: bool) -> int:
    """The field to answer for a resource of ``resource_type``: ``NOT_REQUESTED`` unless
    the client asked, else every operation valid for the type (there is no authorizer)."""
    if not requested:
        return NOT_REQUESTED
    return bit_field(SUPPORTED_OPERATIONS[resource_type])
