"""The group APIs as ``kafka-consumer-groups.sh`` uses them through Kafka's admin client,
over ``tierlog.client``: each group's requests go to its coordinator (FindCoordinator),
ListGroups to every broker, ListOffsets to each partition's leader."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tierlog.cli.common import CLIENT_ID
from tierlog.cli.coordinators import (
    GROUP,
    RETRIABLE,
    CoordinatorNotFound,
    Node,
    error_name,
    find_coordinator,
)
from tierlog.cli.leaders import TopicPartition, leaders_of
from tierlog.cli.leaders import list_offsets as leader_offsets
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey


class GroupCommandError(Exception):
    """A failure the command reports as ``Error: ...`` and exits 1 for."""


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    assignment_strategy: str
    coordinator: Node
    members: tuple[Member, ...] = field(default=())


def decode_assignment(data: bytes | None) -> tuple[TopicPartition, ...]:
    """The partitions of a consumer-protocol assignment (version, [topic, [partition]],
    user data); a member of another protocol, or bytes that do not parse, has none."""
    if not data:
        return ()
    out: list[TopicPartition] = []
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(topics, 0)):
            (n,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = bytes(data[pos : pos + n]).decode("utf-8")
            pos += n
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for p in struct.unpack_from(f">{max(count, 0)}i", data, pos):
                out.append((topic, int(p)))
            pos += 4 * max(count, 0)
    except (struct.error, UnicodeDecodeError):
        return ()
    return tuple(out)


class GroupAdmin:
    """What the command asks of the cluster, on connections it opens as needed and closes
    together. ``timeout_s`` bounds the wait for a coordinator that is still loading."""

    def __init__(self, bootstrap: WireConnection, timeout_s: float) -> None:
        self._bootstrap = bootstrap
        self._timeout_s = timeout_s
        self._metadata = bootstrap.call(
            ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False
        )
        self._brokers = BrokerConnections(bootstrap, self._metadata, CLIENT_ID)
        self._coordinators: dict[str, tuple[Node, WireConnection]] = {}

    def close(self) -> None:
        self._brokers.close()

    # ---- groups -------------------------------------------------------------------------
    def list_groups(self, states: Sequence[str] = ()) -> list[tuple[str, str]]:
        """(group id, state) of every group on every broker (each lists the groups it
        coordinates), sorted by id; a broker still loading its groups is asked again until
        the timeout."""
        found: dict[str, str] = {}
        for b in self._metadata.brokers:
            conn = self._brokers.to(int(b.node_id))
            deadline = time.monotonic() + self._timeout_s
            while True:
                r = conn.call(ApiKey.LIST_GROUPS, 4, states_filter=list(states))
                if int(r.error_code) not in RETRIABLE or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if int(r.error_code) != 0:
                raise GroupCommandError(
                    f"Listing groups on broker {b.node_id} failed: {error_name(int(r.error_code))}"
                )
            for g in r.groups:
                found[str(g.group_id)] = str(g.group_state)
        return sorted(found.items())

    def coordinator(self, group: str) -> tuple[Node, WireConnection]:
        """The group's coordinator and a connection to it (FindCoordinator on the bootstrap
        broker, retried while the offsets topic is being created or loaded)."""
        known = self._coordinators.get(group)
        if known is not None:
            return known
        try:
            found = find_coordinator(self._bootstrap, self._brokers, group, GROUP, self._timeout_s)
        except CoordinatorNotFound as e:
            raise GroupCommandError(
                f"Cannot find the coordinator of group '{group}': {error_name(e.code)}"
            ) from None
        self._coordinators[group] = found
        return found

    def _on_coordinator(self, group: str, call: Any, error: Any) -> Any:
        """``call(conn)`` on the group's coordinator, again on a fresh lookup while it
        answers a retriable coordinator error, until the timeout."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            _, conn = self.coordinator(group)
            answer = call(conn)
            if error(answer) not in RETRIABLE or time.monotonic() > deadline:
                return answer
            self._coordinators.pop(group, None)
            time.sleep(0.1)

    def describe(self, group: str) -> GroupDescription:
        """DescribeGroups on the coordinator; an unknown group is described as ``Dead``."""
        r = self._on_coordinator(
            group,
            lambda c: c.call(
                ApiKey.DESCRIBE_GROUPS, 5, groups=[group], include_authorized_operations=False
            ),
            lambda r: int(r.groups[0].error_code),
        )
        g = r.groups[0]
        if int(g.error_code) != 0:
            raise GroupCommandError(
                f"Describing group '{group}' failed: {error_name(int(g.error_code))}"
            )
        node, _ = self.coordinator(group)
        return GroupDescription(
            group_id=group,
            state=str(g.group_state),
            protocol_type=str(g.protocol_type or ""),
            assignment_strategy=str(g.protocol_data or ""),
            coordinator=node,
            members=tuple(
                Member(
                    member_id=str(m.member_id),
                    group_instance_id=m.group_instance_id,
                    client_id=str(m.client_id),
                    host=str(m.client_host),
                    assignment=decode_assignment(m.member_assignment)
                    if (g.protocol_type or "") == "consumer"
                    else (),
                )
                for m in g.members
            ),
        )

    def committed(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of the group (OffsetFetch of all topics)."""
        r = self._on_coordinator(
            group,
            lambda c: c.call(
                ApiKey.OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False
            ),
            lambda r: int(r.error_code),
        )
        if int(r.error_code) != 0:
            raise GroupCommandError(
                f"Fetching the offsets of group '{group}' failed: {error_name(int(r.error_code))}"
            )
        return {
            (str(t.name), int(p.partition_index)): int(p.committed_offset)
            for t in r.topics
            for p in t.partitions
            if int(p.committed_offset) >= 0 and int(p.error_code) == 0
        }

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit as an admin does: no member, generation -1 (the coordinator accepts
        it only from a group with no active members)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {
                    "partition_index": p,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        body = [{"name": t, "partitions": ps} for t, ps in topics.items()]
        r = self._on_coordinator(
            group,
            lambda c: c.call(
                ApiKey.OFFSET_COMMIT,
                8,
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=body,
            ),
            lambda r: max((int(p.error_code) for t in r.topics for p in t.partitions), default=0),
        )
        failed = [
            f"{t.name}-{p.partition_index}: {error_name(int(p.error_code))}"
            for t in r.topics
            for p in t.partitions
            if int(p.error_code) != 0
        ]
        if failed:
            raise GroupCommandError(
                f"Committing offsets of group '{group}' failed: " + ", ".join(failed)
            )

    def delete_group(self, group: str) -> int:
        """DeleteGroups on the coordinator: Kafka's error code for the group."""
        r = self._on_coordinator(
            group,
            lambda c: c.call(ApiKey.DELETE_GROUPS, 2, groups_names=[group]),
            lambda r: int(r.results[0].error_code),
        )
        return int(r.results[0].error_code)

    def delete_offsets(
        self, group: str, partitions: Iterable[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: the group-level error code and each partition's."""
        body: dict[str, list[dict[str, int]]] = {}
        for topic, p in sorted(set(partitions)):
            body.setdefault(topic, []).append({"partition_index": p})
        r = self._on_coordinator(
            group,
            lambda c: c.call(
                ApiKey.OFFSET_DELETE,
                0,
                group_id=group,
                topics=[{"name": t, "partitions": ps} for t, ps in body.items()],
            ),
            lambda r: int(r.error_code),
        )
        return int(r.error_code), {
            (str(t.name), int(p.partition_index)): int(p.error_code)
            for t in r.topics
            for p in t.partitions
        }

    # ---- topics and offsets -------------------------------------------------------------
    def partitions_of(self, topics: Sequence[str]) -> dict[str, list[int] | None]:
        """Each topic's partitions from Metadata; None for a topic the cluster lacks."""
        if not topics:
            return {}
        md = self._bootstrap.call(
            ApiKey.METADATA,
            12,
            topics=[{"name": t} for t in topics],
            allow_auto_topic_creation=False,
        )
        return {
            str(t.name): sorted(int(p.partition_index) for p in t.partitions)
            if int(t.error_code) == 0
            else None
            for t in md.topics
        }

    def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int | None]:
        """ListOffsets (read_uncommitted, as Kafka's tool) on each partition's leader:
        the offset for ``timestamp`` (-1 latest, -2 earliest, or a time; -1 back from a
        time means no record at or after it), None where the partition cannot be read."""
        wanted = sorted(set(partitions))
        leaders = leaders_of(self._bootstrap, sorted({t for t, _ in wanted}))
        answers = leader_offsets(self._brokers, leaders, wanted, timestamp)
        return {
            tp: answers[tp].offset if tp in answers and answers[tp].error_code == 0 else None
            for tp in wanted
        }
