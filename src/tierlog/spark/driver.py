"""Driver side: what to read. Partitions, offset bounds, remote segments, then the plan.

Three ways to learn what exists:
  * a broker (`kafka.bootstrap.servers`): Metadata and ListOffsets for partitions and
    offsets, and the remote catalog (`remote_catalog`) for COPY_FINISHED segments;
  * the bucket alone (`tierlog.catalog=bucket`, or `auto` when the broker cannot be
    reached and the job names the storage plugin): the object store's self-describing
    manifests (`bucket`); only remote offsets exist then, read without any broker;
  * a Kafka log directory (`tierlog.log.dir`): segment files read in place, no broker -
    for backups, a stopped broker's disk, and tests of the executor path.

Timestamp bounds are ListOffsets by timestamp: the broker's answer, or without a broker
the same answer worked out from the segments (`timestamps`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tierlog.log.txn_index import AbortedTxn
from tierlog.spark.bucket import bucket_catalog
from tierlog.spark.options import (
    EARLIEST,
    LATEST,
    TP,
    Assign,
    Bound,
    OffsetBound,
    OptionError,
    SourceOptions,
    Subscribe,
    SubscribePattern,
    Subscription,
    TimestampBound,
)
from tierlog.spark.planning import (
    ColdSegment,
    Lost,
    Slice,
    cap_records,
    ensure_min_partitions,
    plan_partition,
    split_large_segments,
)
from tierlog.spark.reader import DataLossError
from tierlog.spark.segments import RsmSpec, aborted_txns, offset_index, scan_log_dir
from tierlog.spark.timestamps import offsets_for_timestamps
from tierlog.spark.wire import BrokerClient, TopicInfo

log = logging.getLogger(__name__)

RemoteCatalog = Callable[
    [BrokerClient, SourceOptions, Mapping[str, TopicInfo]], dict[TP, list[ColdSegment]]
]


@dataclass(frozen=True)
class PartitionView:
    """What the driver knows about one partition at planning time."""

    tp: TP
    log_start: int
    high_watermark: int
    segments: tuple[ColdSegment, ...] = ()


def select_partitions(sub: Subscription, available: Iterable[TP]) -> list[TP]:
    avail = sorted(set(available))
    if isinstance(sub, Subscribe):
        return [tp for tp in avail if tp[0] in sub.topics]
    if isinstance(sub, SubscribePattern):
        return [tp for tp in avail if sub.matches(tp[0])]
    missing = set(sub.partitions) - set(avail)
    if missing:
        raise OptionError(f"assigned partitions do not exist: {sorted(missing)}")
    return list(sub.partitions)


def select_partitions_of(sub: Subscription, topic: str) -> bool:
    """Whether the subscription may include partitions of `topic`."""
    if isinstance(sub, Subscribe):
        return topic in sub.topics
    if isinstance(sub, SubscribePattern):
        return sub.matches(topic)
    return any(t == topic for t, _ in sub.partitions)


def resolve_bound(
    bound: Bound,
    tps: list[TP],
    views: Mapping[TP, PartitionView],
    by_timestamp: Callable[[dict[TP, int]], dict[TP, tuple[int, int]]],
    side: str,
) -> dict[TP, int]:
    """Concrete offsets for one side of the range, following Spark's rules."""
    if isinstance(bound, OffsetBound):
        if bound.explicit:
            missing = [tp for tp in tps if tp not in bound.explicit]
            if missing:
                raise OptionError(
                    f"{side}Offsets must specify all TopicPartitions; missing {missing}"
                )
        out: dict[TP, int] = {}
        for tp in tps:
            want = bound.explicit.get(tp, bound.default)
            v = views[tp]
            out[tp] = (
                v.log_start if want == EARLIEST else v.high_watermark if want == LATEST else want
            )
        return out
    if bound.everywhere is None:
        missing = [tp for tp in tps if tp not in bound.explicit]
        if missing:
            raise OptionError(
                f"{side}OffsetsByTimestamp must specify all TopicPartitions; missing {missing}"
            )
    queries = {tp: bound.explicit.get(tp, bound.everywhere or 0) for tp in tps}
    found = by_timestamp(queries)
    out = {}
    for tp in tps:
        offset = found[tp][0]
        if offset < 0:
            if bound.strategy == "error" and side == "starting":
                raise OptionError(
                    f"no offset of {tp[0]}-{tp[1]} has a timestamp >= {queries[tp]}; "
                    "set startingOffsetsByTimestampStrategy=latest to start at the end"
                )
            offset = views[tp].high_watermark
        out[tp] = offset
    return out


def plan_slices(
    views: Mapping[TP, PartitionView],
    starts: Mapping[TP, int],
    ends: Mapping[TP, int],
    opts: SourceOptions,
    *,
    broker: bool,
) -> list[Slice]:
    slices: list[Slice] = []
    lost: list[Lost] = []
    for tp, start in sorted(starts.items()):
        end = ends[tp]
        if end < start:
            raise OptionError(
                f"{tp[0]}-{tp[1]}: ending offset {end} is before starting offset {start}"
            )
        v = views[tp]
        plan = plan_partition(
            tp, start, end, v.log_start, v.high_watermark, v.segments, broker=broker
        )
        slices.extend(plan.slices)
        lost.extend(plan.lost)
    if lost:
        what = "; ".join(x.describe() for x in lost)
        if opts.fail_on_data_loss:
            raise DataLossError(
                f"{what} are no longer available. Some data may have been lost because it is "
                "no longer in the log or the remote tier (e.g. deleted by retention). Set "
                "failOnDataLoss=false to skip such offsets."
            )
        log.warning("skipping unavailable %s", what)
    slices = split_large_segments(
        slices, opts.split_bytes, lambda seg: offset_index(seg.ref, seg.first)
    )
    if opts.max_records_per_partition:
        slices = cap_records(slices, opts.max_records_per_partition)
    if opts.min_partitions:
        slices = ensure_min_partitions(slices, opts.min_partitions)
    return slices


def attach_aborted(
    slices: Sequence[Slice], views: Mapping[TP, PartitionView], client: BrokerClient | None
) -> list[Slice]:
    """read_committed: give each cold slice the aborted transactions it must drop.

    Kafka's collection for a remote read, done once per partition by the driver: the
    transaction indexes of the cold segments, then (with a broker) the aborted transactions
    whose data lies in those segments but whose ABORT marker is still only local, which a
    read_committed Fetch at the first offset after them returns. Without a broker an abort
    whose marker has not reached the remote tier cannot be known.
    """
    out: list[Slice] = []
    known: dict[TP, tuple[list[AbortedTxn], list[tuple[int, int]]]] = {}
    for s in slices:
        if s.segment is None:
            out.append(s)
            continue
        if s.tp not in known:
            known[s.tp] = _cold_aborted(views[s.tp], client)
        indexed, beyond = known[s.tp]
        pairs = [
            (t.producer_id, t.first_offset)
            for t in indexed
            if t.last_offset >= s.start and t.first_offset < s.end
        ]
        pairs += [(pid, first) for pid, first in beyond if first < s.end]
        out.append(replace(s, aborted=tuple(dict.fromkeys(pairs))))
    return out


def _cold_aborted(
    view: PartitionView, client: BrokerClient | None
) -> tuple[list[AbortedTxn], list[tuple[int, int]]]:
    indexed = [t for seg in view.segments for t in aborted_txns(seg.ref)]
    beyond: list[tuple[int, int]] = []
    after = max((seg.last + 1 for seg in view.segments), default=None)
    if client is not None and after is not None and after < view.high_watermark:
        beyond = list(client.fetch(view.tp, after, max_bytes=1, read_committed=True).aborted)
    return indexed, beyond


class Catalog:
    """One planning session's view of the cluster (or of a log directory)."""

    def __init__(self, opts: SourceOptions, remote_catalog: RemoteCatalog | None = None) -> None:
        self.opts = opts
        self._remote_catalog = remote_catalog
        use_broker = opts.bootstrap is not None and opts.catalog != "bucket"
        self.client = BrokerClient(opts.bootstrap) if opts.bootstrap and use_broker else None
        # True once planning uses the bucket alone: slices then never fall back to a broker
        self.offline = opts.log_dir is None and self.client is None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def views(self) -> dict[TP, PartitionView]:
        if self.opts.log_dir is not None:
            scanned = scan_log_dir(self.opts.log_dir)
            tps = select_partitions(self.opts.subscription, scanned)
            out = {}
            for tp in tps:
                segs = scanned[tp]
                first = segs[0].first if segs else 0
                last = segs[-1].last + 1 if segs else 0
                out[tp] = PartitionView(tp, first, last, tuple(segs))
            return out
        if self.client is None:
            return self._bucket_views()
        try:
            return self._broker_views(self.client)
        except (ConnectionError, TimeoutError) as exc:
            if self.opts.catalog != "auto" or self.opts.rsm_class is None:
                raise
            log.warning("broker unreachable (%s): planning from the bucket's manifests", exc)
            self.client.close()
            self.client = None
            self.offline = True
            return self._bucket_views()

    def _bucket_views(self) -> dict[TP, PartitionView]:
        assert self.opts.rsm_class is not None
        spec = RsmSpec.of(self.opts.rsm_class, self.opts.rsm_config)
        sub = self.opts.subscription
        found = bucket_catalog(spec, lambda topic: bool(select_partitions_of(sub, topic)))
        tps = select_partitions(sub, found)
        return {
            tp: PartitionView(
                tp, found[tp][0].first, max(s.last for s in found[tp]) + 1, tuple(found[tp])
            )
            for tp in tps
        }

    def _broker_views(self, client: BrokerClient) -> dict[TP, PartitionView]:
        topics = client.metadata(
            self.opts.subscription.topics
            if isinstance(self.opts.subscription, Subscribe)
            else {t for t, _ in self.opts.subscription.partitions}
            if isinstance(self.opts.subscription, Assign)
            else None
        )
        topics = {n: t for n, t in topics.items() if not t.internal}
        available = [(n, p) for n, t in topics.items() for p in t.leaders]
        tps = select_partitions(self.opts.subscription, available)
        earliest = client.list_offsets(dict.fromkeys(tps, EARLIEST))
        latest = client.list_offsets(
            dict.fromkeys(tps, LATEST), read_committed=self.opts.read_committed
        )
        remote: dict[TP, list[ColdSegment]] = {}
        if self.opts.remote_reads and self._remote_catalog is not None:
            remote = self._remote_catalog(client, self.opts, topics)
        return {
            tp: PartitionView(tp, earliest[tp][0], latest[tp][0], tuple(remote.get(tp, ())))
            for tp in tps
        }

    def by_timestamp(
        self, views: Mapping[TP, PartitionView]
    ) -> Callable[[dict[TP, int]], dict[TP, tuple[int, int]]]:
        """ListOffsets by timestamp: the broker's, or worked out from the segments the
        bucket (or log directory) holds, with the same meaning."""
        if self.client is not None:
            client = self.client
            return lambda queries: client.list_offsets(
                queries, read_committed=self.opts.read_committed
            )
        segments = {tp: v.segments for tp, v in views.items()}
        return lambda queries: offsets_for_timestamps(segments, queries)

    def resolve(self, bound: Bound, views: Mapping[TP, PartitionView], side: str) -> dict[TP, int]:
        return resolve_bound(bound, sorted(views), views, self.by_timestamp(views), side)

    def plan(
        self, views: Mapping[TP, PartitionView], starts: Mapping[TP, int], ends: Mapping[TP, int]
    ) -> list[Slice]:
        slices = plan_slices(views, starts, ends, self.opts, broker=self.client is not None)
        if self.opts.read_committed:
            slices = attach_aborted(slices, views, self.client)
        return slices


def timestamp_bound_used(opts: SourceOptions) -> bool:
    return isinstance(opts.starting, TimestampBound) or isinstance(opts.ending, TimestampBound)
