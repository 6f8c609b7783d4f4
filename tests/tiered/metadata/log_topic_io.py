"""``MetadataTopicIO`` over a real ``tierlog.log.LogManager``, without a broker.

The production adapter is ``tierlog.server.metadata_topic.LogMetadataTopicIO`` (the broker
binds it to its RLMM); without a ``create_topic`` callback it creates the metadata topic's
partitions directly in the log engine, which is what these tests and benchmarks need.
"""

from __future__ import annotations

from tierlog.server.metadata_topic import LogMetadataTopicIO


class LogManagerMetadataTopicIO(LogMetadataTopicIO):
    """The broker's adapter with the topic created straight in the log engine."""
