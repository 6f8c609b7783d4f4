"""``--delete`` (DeleteGroups) and ``--delete-offsets`` (OffsetDelete), with Kafka's
messages for the refusals a coordinator gives."""

from __future__ import annotations

import sys

from tierlog.cli.consumer_groups.admin import GroupAdmin, GroupCommandError
from tierlog.cli.consumer_groups.options import parse_topic_arg
from tierlog.cli.leaders import TopicPartition
from tierlog.protocol.errors import ErrorCode

#: How Kafka's admin client words the errors a group deletion can meet.
_WHY = {
    ErrorCode.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException: The group id does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException: The group is not empty.",
    ErrorCode.INVALID_GROUP_ID: "InvalidGroupIdException: The configured groupId is invalid.",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "GroupSubscribedToTopicException: Deleting offsets of "
    "a topic is forbidden while the consumer group is actively subscribed to it.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException: This server does "
    "not host this topic-partition.",
}


def _why(code: int) -> str:
    return _WHY.get(ErrorCode(code), ErrorCode(code).name)


def delete_groups(admin: GroupAdmin, groups: list[str]) -> bool:
    deleted, failed = [], {}
    for group in groups:
        code = admin.delete_group(group)
        if code == 0:
            deleted.append(group)
        else:
            failed[group] = code
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(deleted)}') was successful.")
        return True
    print("\nError: Deletion of some consumer groups failed:", file=sys.stderr)
    for group, code in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {_why(code)}", file=sys.stderr)
    if deleted:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(deleted)}'")
    return False


def delete_offsets(admin: GroupAdmin, group: str, topics: list[str]) -> bool:
    partitions: list[TopicPartition] = []
    whole: list[str] = []
    for arg in topics:
        topic, ps = parse_topic_arg(arg)
        if ps is None:
            whole.append(topic)
        else:
            partitions += [(topic, p) for p in ps]
    results: dict[TopicPartition, int] = {}
    for topic, ps in admin.partitions_of(whole).items():
        if ps is None:
            results[(topic, -1)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            partitions += [(topic, p) for p in ps]
    code, answered = admin.delete_offsets(group, partitions) if partitions else (0, {})
    results.update(answered)
    if code == 0 and all(c == 0 for c in results.values()):
        print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    elif code == ErrorCode.GROUP_ID_NOT_FOUND:
        print(f"\nError: '{group}' does not exist.", file=sys.stderr)
    elif code == ErrorCode.INVALID_GROUP_ID:
        print(f"\nError: '{group}' is not valid.", file=sys.stderr)
    elif code == ErrorCode.NON_EMPTY_GROUP:
        print(
            f"\nError: Deleting offsets of a consumer group '{group}' is forbidden if the group "
            "is not empty.",
            file=sys.stderr,
        )
    elif code == 0 or code in (
        ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ):
        print(
            "\nError: Encounter some partition level error, see the follow-up details:",
            file=sys.stderr,
        )
    else:
        raise GroupCommandError(f"Encounter some unknown error: {ErrorCode(code).name}")
    print()
    print(f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}".rstrip())
    for (topic, p), c in sorted(results.items()):
        status = "Successful" if c == 0 else f"Error: :{_why(c)}"
        print(f"{topic:<30} {p if p >= 0 else 'Not Provided'!s:<15} {status}".rstrip())
    return code == 0 and all(c == 0 for c in results.values())
