"""Which segments the job may read from the bucket: the driver's view of remote metadata.

The authority is `__remote_log_metadata`, read here as an ordinary client: only the
metadata partitions our user partitions hash to, from their start to the end offset taken
before reading, folded into the same `RemoteLogMetadataCache` the broker uses. Only
COPY_FINISHED segments are handed to the planner - a segment still being copied is also
still local, and one being deleted is skipped, so at planning time nothing is read twice or
missed. A segment deleted after planning is handled by the executor's broker fallback.

The storage plugin for executors is the broker's (`remote.log.storage.manager.class.name`
from DescribeConfigs) with its non-secret `rsm.config.*` values, overlaid by the job's
`tierlog.rsm.class` / `tierlog.rsm.config.*` options (credentials and keys).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from tierlog.spark.decode import decode_batches
from tierlog.spark.options import TP, OptionError, SourceOptions
from tierlog.spark.planning import ColdSegment
from tierlog.spark.segments import RemoteSegmentRef, RsmSpec
from tierlog.spark.wire import BrokerClient, TopicInfo
from tierlog.tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)
from tierlog.tiered.metadata import (
    METADATA_TOPIC,
    RemoteLogMetadataCache,
    RemoteLogMetadataTopicPartitioner,
    deserialize,
)

log = logging.getLogger(__name__)

RSM_CLASS_KEY = "remote.log.storage.manager.class.name"
RSM_PREFIX_KEY = "remote.log.storage.manager.impl.prefix"


def rsm_spec(client: BrokerClient, opts: SourceOptions) -> RsmSpec | None:
    """The plugin executors load, or None when neither broker nor options name one."""
    props: dict[str, str] = {}
    class_name = opts.rsm_class
    try:
        configs = client.broker_configs()
    except Exception as exc:  # a broker without DescribeConfigs still serves reads
        log.warning("cannot describe broker configs (%s); using only tierlog.rsm.* options", exc)
        configs = {}
    prefix = configs.get(RSM_PREFIX_KEY) or "rsm.config."
    for key, value in configs.items():
        if key.startswith(prefix) and value is not None:
            props[key[len(prefix) :]] = value
    class_name = class_name or configs.get(RSM_CLASS_KEY)
    props.update(opts.rsm_config)
    return RsmSpec.of(class_name, props) if class_name else None


def fold_metadata(
    values: list[bytes], wanted: Mapping[TopicIdPartition, TP]
) -> dict[TopicIdPartition, RemoteLogMetadataCache]:
    """Replay metadata record values (in offset order) into one cache per wanted partition."""
    caches = {tip: RemoteLogMetadataCache() for tip in wanted}
    for value in values:
        record = deserialize(value)
        if isinstance(record, RemoteLogSegmentMetadata):
            cache = caches.get(record.topic_id_partition)
            if cache is not None:
                cache.add_copy_in_progress_segment(record)
        elif isinstance(record, RemoteLogSegmentMetadataUpdate):
            cache = caches.get(record.remote_log_segment_id.topic_id_partition)
            if cache is not None:
                try:
                    cache.update_remote_log_segment_metadata(record)
                except RemoteResourceNotFoundException:
                    pass  # replay: the segment may predate what we read; the cache drops it
        elif (
            isinstance(record, RemotePartitionDeleteMetadata)
            and record.topic_id_partition in caches
        ):
            caches[record.topic_id_partition] = RemoteLogMetadataCache()
    return caches


def _read_partition(client: BrokerClient, tp: TP) -> list[bytes]:
    ((start, _),) = client.list_offsets({tp: -2}).values()
    ((end, _),) = client.list_offsets({tp: -1}).values()
    values: list[bytes] = []
    cursor = start
    while cursor < end:
        r = client.fetch(tp, cursor)
        if r.error_code != 0:
            raise OptionError(f"cannot read {tp[0]}-{tp[1]}: error {r.error_code}")
        d = decode_batches(
            r.records, topic=tp[0], partition=tp[1], start=cursor, end=end, include_headers=False
        )
        values.extend(v for v in d.batch.column("value").to_pylist() if v is not None)
        if d.next_offset <= cursor:
            break
        cursor = d.next_offset
    return values


def remote_catalog(
    client: BrokerClient, opts: SourceOptions, topics: Mapping[str, TopicInfo]
) -> dict[TP, list[ColdSegment]]:
    meta = client.metadata([METADATA_TOPIC]).get(METADATA_TOPIC)
    if meta is None or not meta.leaders:
        return {}
    spec = rsm_spec(client, opts)
    if spec is None:
        log.warning("no remote storage plugin configured; reading everything via the broker")
        return {}
    partitioner = RemoteLogMetadataTopicPartitioner(len(meta.leaders))
    wanted: dict[TopicIdPartition, TP] = {}
    for name, info in topics.items():
        for p in info.leaders:
            wanted[TopicIdPartition(uuid.UUID(info.topic_id), name, p)] = (name, p)
    by_mp: dict[int, dict[TopicIdPartition, TP]] = {}
    for tip, tp in wanted.items():
        by_mp.setdefault(partitioner.metadata_partition(tip), {})[tip] = tp
    out: dict[TP, list[ColdSegment]] = {}
    for mp, members in sorted(by_mp.items()):
        caches = fold_metadata(_read_partition(client, (METADATA_TOPIC, mp)), members)
        for tip, cache in caches.items():
            out[members[tip]] = [
                ColdSegment(
                    m.start_offset,
                    m.end_offset,
                    m.segment_size_in_bytes,
                    RemoteSegmentRef.of(spec, m),
                )
                for m in cache.list_all_remote_log_segments()
                if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            ]
    return out
