"""The remote log metadata as rows: `__remote_log_metadata` materialized by Spark tasks.

Each metadata partition is read and folded by its own task: every user partition's events
live in exactly one metadata partition (murmur2 over the user partition), in order, so
per-partition replay gives the same state as the broker's cache. Rows carry what the audit
and usage jobs join on, as the storage plugin's inventory says it: the segment's key
(``base``), the objects it must have, the total stored size recorded at upload, and the
sizes (``md_*_size``, by object kind) its metadata alone implies.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from tierlog.spark.jobs.inventory import Inventory
from tierlog.spark.remote import read_partition
from tierlog.spark.wire import BrokerClient
from tierlog.tiered.api import (
    ObjectKind,
    RemoteLogSegmentMetadata,
    SupportsInventory,
    TopicIdPartition,
)
from tierlog.tiered.metadata import METADATA_TOPIC
from tierlog.tiered.metadata.fold import fold_metadata

SEGMENT_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("topic_id", pa.string()),
        ("partition", pa.int32()),
        ("segment_id", pa.string()),
        ("state", pa.string()),
        ("start_offset", pa.int64()),
        ("end_offset", pa.int64()),
        ("max_timestamp_ms", pa.int64()),
        ("event_timestamp_ms", pa.int64()),
        ("segment_size", pa.int64()),
        ("stored_size", pa.int64()),
        ("base", pa.string()),
        ("required", pa.list_(pa.string())),
        ("md_log_size", pa.int64()),
        ("md_index_size", pa.int64()),
        ("md_manifest_size", pa.int64()),
    ]
)

SEGMENT_DDL = (
    "topic string, topic_id string, partition int, segment_id string, state string, "
    "start_offset long, end_offset long, max_timestamp_ms long, event_timestamp_ms long, "
    "segment_size long, stored_size long, base string, required array<string>, "
    "md_log_size long, md_index_size long, md_manifest_size long"
)


def metadata_partitions(bootstrap: str) -> int:
    with BrokerClient(bootstrap) as client:
        meta = client.metadata([METADATA_TOPIC]).get(METADATA_TOPIC)
        return 0 if meta is None else len(meta.leaders)


def partition_row(tip: TopicIdPartition) -> dict[str, Any]:
    """The row naming a user partition (``segment_id`` null, state ``PARTITION``)."""
    return {
        "topic": tip.topic,
        "topic_id": str(tip.topic_id),
        "partition": tip.partition,
        "state": "PARTITION",
        "required": [],
    }


def segment_row(plugin: SupportsInventory, md: RemoteLogSegmentMetadata) -> dict[str, Any]:
    """One segment's row, its objects as the storage plugin's inventory says."""
    tip = md.topic_id_partition
    sizes = plugin.metadata_sizes(md)
    return {
        "topic": tip.topic,
        "topic_id": str(tip.topic_id),
        "partition": tip.partition,
        "segment_id": str(md.remote_log_segment_id.id),
        "state": md.state.name,
        "start_offset": md.start_offset,
        "end_offset": md.end_offset,
        "max_timestamp_ms": md.max_timestamp_ms,
        "event_timestamp_ms": md.event_timestamp_ms,
        "segment_size": md.segment_size_in_bytes,
        "stored_size": plugin.recorded_size(md),
        "base": plugin.segment_key(md),
        "required": plugin.required_keys(md),
        "md_log_size": sizes.get(ObjectKind.LOG),
        "md_index_size": sizes.get(ObjectKind.INDEX),
        "md_manifest_size": sizes.get(ObjectKind.MANIFEST),
    }


def segment_rows(
    bootstrap: str, inventory: Inventory, partition: int, partition_rows: bool = False
) -> list[dict[str, Any]]:
    """One row per segment; with ``partition_rows`` also one per user partition the
    metadata has ever named, deleted ones included: the audit tells this cluster's topics
    from another cluster's by them."""
    with BrokerClient(bootstrap) as client:
        values = read_partition(client, (METADATA_TOPIC, partition))
    plugin = inventory.plugin
    rows: list[dict[str, Any]] = []
    for tip, cache in fold_metadata(values, None).items():
        if partition_rows:
            rows.append(partition_row(tip))
        rows.extend(segment_row(plugin, md) for md in cache.list_all_remote_log_segments())
    return rows


def read_segments(bootstrap: str, inventory: Inventory, partition_rows: bool = False) -> Any:
    """A function for `mapInArrow` over a DataFrame of metadata partition numbers (`id`)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for p in batch.column("id").to_pylist():
                rows = segment_rows(bootstrap, inventory, int(p), partition_rows)
                yield pa.RecordBatch.from_pylist(rows, schema=SEGMENT_SCHEMA)

    return run
