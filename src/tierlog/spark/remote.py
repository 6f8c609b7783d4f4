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
    RSM_CLASS_KEY,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tierlog.tiered.metadata import METADATA_TOPIC
from tierlog.tiered.metadata.fold import (
    MetadataLogReader,
    fold_metadata_partitions,
    read_metadata_partition,
)

log = logging.getLogger(__name__)

RSM_PREFIX_KEY = "remote.log.storage.manager.impl.prefix"


def rsm_spec(client: BrokerClient, opts: SourceOptions) -> RsmSpec | None:
    """The plugin executors load, or None when neither broker nor options name one."""
    return broker_rsm_spec(client, opts.rsm_class, opts.rsm_config)


def broker_rsm_spec(
    client: BrokerClient, class_name: str | None, overrides: Mapping[str, str]
) -> RsmSpec | None:
    """The broker's storage plugin and its non-secret settings, overlaid by the job's own
    (`overrides`: credentials, keys); None when neither names a plugin."""
    props: dict[str, str] = {}
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
    props = executor_props(props)
    props.update(overrides)
    return RsmSpec.of(class_name, props) if class_name else None


#: Broker settings that describe the broker's own machine or its upload side; an executor
#: must not inherit them (a disk chunk cache is wiped on start: the broker's would be).
_BROKER_LOCAL = ("fetch.chunk.cache.path", "fetch.chunk.cache.class", "upload.")


def executor_props(broker_props: Mapping[str, str]) -> dict[str, str]:
    """The broker's plugin settings minus what is local to the broker; executors keep the
    plugin's in-memory chunk cache unless the job's own options say otherwise."""
    return {
        k: v for k, v in broker_props.items() if not any(k.startswith(b) for b in _BROKER_LOCAL)
    }


class BrokerMetadataReader(MetadataLogReader):
    """``__remote_log_metadata`` (or ``topic``) read through the job's broker client."""

    def __init__(self, client: BrokerClient, topic: str = METADATA_TOPIC) -> None:
        self._client = client
        self._topic = topic

    def offsets(self, partition: int) -> tuple[int, int]:
        tp = (self._topic, partition)
        ((start, _),) = self._client.list_offsets({tp: -2}).values()
        ((end, _),) = self._client.list_offsets({tp: -1}).values()
        return start, end

    def read(
        self, partition: int, offset: int, end: int
    ) -> tuple[list[tuple[int, bytes | None]], int]:
        r = self._client.fetch((self._topic, partition), offset)
        if r.error_code != 0:
            raise OptionError(f"cannot read {self._topic}-{partition}: error {r.error_code}")
        d = decode_batches(
            r.records,
            topic=self._topic,
            partition=partition,
            start=offset,
            end=end,
            include_headers=False,
        )
        offsets = d.batch.column("offset").to_pylist()
        values = d.batch.column("value").to_pylist()
        return list(zip(offsets, values, strict=True)), d.next_offset


def read_partition(client: BrokerClient, tp: TP) -> list[bytes]:
    """Every record value of one partition, from its start to the end taken first."""
    return read_metadata_partition(BrokerMetadataReader(client, tp[0]), tp[1])


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
    wanted: dict[TopicIdPartition, TP] = {}
    for name, info in topics.items():
        for p in info.leaders:
            wanted[TopicIdPartition(uuid.UUID(info.topic_id), name, p)] = (name, p)
    caches = fold_metadata_partitions(BrokerMetadataReader(client), len(meta.leaders), wanted)
    out: dict[TP, list[ColdSegment]] = {}
    for tip, cache in caches.items():
        out[wanted[tip]] = [
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
