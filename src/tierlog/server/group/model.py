"""Requests and answers of the group coordinator, as plain data.

These mirror the Kafka wire messages closely enough that a request handler is a field-by-field
copy, but they carry no wire versions: the handler fills version-dependent defaults (for
example ``rebalance_timeout_ms = session_timeout_ms`` for JoinGroup v0, or
``require_known_member_id`` for v4+) before calling the coordinator, so the coordinator's
rules never branch on a version number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tierlog.protocol.errors import ErrorCode

# Kafka's sentinels, used on the wire and therefore in these types.
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_LEADER_EPOCH = -1
NO_OFFSET = -1
NO_RETENTION = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


# --- FindCoordinator --------------------------------------------------------------------------


class CoordinatorKeyType:
    GROUP = 0
    TRANSACTION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorRequest:
    key_type: int = CoordinatorKeyType.GROUP
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorEntry:
    key: str
    node_id: int
    host: str
    port: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorResponse:
    coordinators: tuple[CoordinatorEntry, ...]


# --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -------------------------------------------


@dataclass(frozen=True, slots=True)
class Protocol:
    """One assignment strategy a member offers, in the member's order of preference."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: str
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = False
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponse:
    error_code: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResponse:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    error_code: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    """LeaveGroup v0-v2 carry one member: the handler wraps it in a one-element tuple."""

    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResponse:
    """For v0-v2 the handler reports ``members[0].error_code`` when ``error_code`` is NONE."""

    error_code: ErrorCode
    members: tuple[LeftMember, ...] = ()


# --- offsets ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""
    commit_timestamp_ms: int = -1  # OffsetCommit v1 only; -1 means "now"


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    """A simple (assign()) commit has ``generation_id=-1`` and an empty ``member_id``."""

    group_id: str
    generation_id: int = NO_GENERATION
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = NO_RETENTION  # OffsetCommit v2-v4
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitPartitionResult:
    topic: str
    partition: int
    error_code: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    partitions: tuple[OffsetCommitPartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchGroup:
    group_id: str
    partitions: tuple[TopicPartition, ...] | None  # None: every committed partition


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    """OffsetFetch v0-v7 carry one group: the handler wraps it in a one-element tuple."""

    groups: tuple[OffsetFetchGroup, ...]
    require_stable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchGroupResult:
    group_id: str
    error_code: ErrorCode
    partitions: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    groups: tuple[OffsetFetchGroupResult, ...]


# --- admin ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsResponse:
    error_code: ErrorCode
    groups: tuple[ListedGroup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    error_code: ErrorCode
    group_id: str
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol name, only while Stable
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletedGroup:
    group_id: str
    error_code: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse:
    results: tuple[DeletedGroup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeletePartitionResult:
    topic: str
    partition: int
    error_code: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponse:
    """A group-level ``error_code`` other than NONE comes with no partition results."""

    error_code: ErrorCode
    partitions: tuple[OffsetDeletePartitionResult, ...] = ()
