"""The topics in a ``consumer``-protocol member's subscription metadata.

Kafka's ``ConsumerProtocolSubscription`` (every version, 0 to 3) starts with an int16
version and an int32-counted array of int16-length topic names; later fields (user data,
owned partitions, generation, rack) follow and are not needed to know what a member
consumes, so only that prefix is read. OffsetDelete uses it to refuse deleting the offsets
of a topic a live consumer group is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC).
"""

from __future__ import annotations

import struct

CONSUMER_PROTOCOL_TYPE = "consumer"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The subscription's topics, or None if ``metadata`` is not a subscription we can read."""
    try:
        pos = 2  # the version: every version starts with the topics
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        if count < 0:
            return frozenset()
        topics = []
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.append(metadata[pos : pos + n].decode("utf-8"))
            pos += n
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)
