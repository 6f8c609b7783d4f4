"""Kafka's config resource types by their wire value.

The numbers are Kafka's (``org.apache.kafka.common.config.ConfigResource.Type``), the
``resource_type`` of DescribeConfigs, AlterConfigs and IncrementalAlterConfigs resources.
Only the types tierlog names are listed; a value read off the wire stays a plain ``int``.
"""

from __future__ import annotations

from enum import IntEnum


class ConfigResourceType(IntEnum):
    """Kafka's config resource types by their wire value."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
