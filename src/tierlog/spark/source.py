"""The PySpark data source `tierlog`: batch and streaming reads, batch and streaming writes.

Only this module imports pyspark, so planning, decoding and reading stay testable without
a JVM. Everything Spark pickles to executors (the readers, their options and the planned
slices) is plain data.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from tierlog.spark.driver import Catalog, PartitionView, RemoteCatalog
from tierlog.spark.options import (
    TP,
    OptionError,
    SourceOptions,
    parse_source_options,
    partition_map,
    partition_map_json,
)
from tierlog.spark.planning import Slice, pack_slices, rate_limit
from tierlog.spark.reader import ReadContext, read_slice, warm
from tierlog.spark.remote import remote_catalog
from tierlog.spark.schema import spark_ddl
from tierlog.spark.sink import SinkOptions, check_sink_schema, parse_sink_options, produce_batches

_remote_catalog: RemoteCatalog | None = remote_catalog


def set_remote_catalog(catalog: RemoteCatalog | None) -> None:
    """Replace how the driver finds COPY_FINISHED segments (default: tierlog.spark.remote;
    None reads everything through the broker)."""
    global _remote_catalog  # noqa: PLW0603  the process-wide hook _catalog reads, by design
    _remote_catalog = catalog


def _catalog(opts: SourceOptions) -> Catalog:
    return Catalog(opts, _remote_catalog)


#: Packing never goes below one input partition per topic partition, as many as Spark's
#: Kafka source plans; `minPartitions` asks for more (see `pack_slices`).
MIN_PACKED_PARTITIONS = 1


class SlicePartition(InputPartition):
    """One Spark task: consecutive slices of one partition (several only when segments are
    small). `offline`: planned from the bucket alone, so no broker to fall back on."""

    def __init__(self, slices: tuple[Slice, ...], offline: bool = False) -> None:
        super().__init__(slices)
        self.slices = slices
        self.offline = offline


def _partitions(opts: SourceOptions, slices: list[Slice], offline: bool) -> list[InputPartition]:
    groups: list[tuple[Slice, ...]]
    if opts.min_partitions or opts.max_records_per_partition:
        groups = [(s,) for s in slices]  # the user asked for a split: do not undo it
    else:
        groups = pack_slices(slices, opts.split_bytes, MIN_PACKED_PARTITIONS)
    return [SlicePartition(g, offline) for g in groups]


def _context(opts: SourceOptions, offline: bool) -> ReadContext:
    bootstrap = None if offline else opts.bootstrap
    return ReadContext(opts.include_headers, opts.fail_on_data_loss, bootstrap, opts.read_committed)


def _read(opts: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, SlicePartition):
        return  # Spark's stand-in InputPartition(None) for an empty plan
    ctx = _context(opts, partition.offline)
    for i, s in enumerate(partition.slices):
        if i + 1 < len(partition.slices):
            warm(partition.slices[i + 1])  # fetch the next segment's head meanwhile
        yield from read_slice(s, ctx)


class TierlogBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        with _catalog(self.opts) as c:
            views = c.views()
            starts = c.resolve(self.opts.starting, views, "starting")
            ends = c.resolve(self.opts.ending, views, "ending")
            return _partitions(self.opts, c.plan(views, starts, ends), c.offline)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)


def _offsets(d: dict[str, Any]) -> dict[TP, int]:
    import json

    return partition_map("offset", json.dumps(d))


class TierlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are Spark-Kafka-style JSON: {"topic": {"partition": next offset}}."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._frozen: dict[TP, int] | None = None

    def _views(self) -> tuple[Catalog, dict[TP, PartitionView]]:
        c = _catalog(self.opts)
        return c, c.views()

    def initialOffset(self) -> dict[str, Any]:
        c, views = self._views()
        with c:
            return partition_map_json(c.resolve(self.opts.starting, views, "starting"))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        c, views = self._views()
        with c:
            self._frozen = {tp: v.high_watermark for tp, v in views.items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        c, views = self._views()
        with c:
            latest = {tp: v.high_watermark for tp, v in views.items()}
        if self._frozen is not None:
            latest = {
                tp: min(end, self._frozen[tp]) for tp, end in latest.items() if tp in self._frozen
            }
        begin = _offsets(start)
        for tp in latest:
            begin.setdefault(tp, views[tp].log_start)  # new partitions start at earliest
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        # never move backwards (e.g. a partition whose log was truncated)
        latest = {tp: max(end, begin[tp]) for tp, end in latest.items()}
        return partition_map_json(latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ends = _offsets(end)
        c, views = self._views()
        with c:
            begin = _offsets(start)
            starts = {tp: begin.get(tp, views[tp].log_start if tp in views else 0) for tp in ends}
            known = {tp: views[tp] for tp in ends if tp in views}
            missing = [tp for tp in ends if tp not in views]
            if missing:
                if self.opts.fail_on_data_loss:
                    raise OptionError(f"partitions {missing} disappeared (topic deleted?)")
                starts = {tp: o for tp, o in starts.items() if tp in known}
                ends = {tp: o for tp, o in ends.items() if tp in known}
            return _partitions(self.opts, c.plan(known, starts, ends), c.offline)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, not in Kafka."""


@dataclass
class SinkCommit(WriterCommitMessage):
    rows: int


def _sink_fields(schema: StructType) -> dict[str, str]:
    return {f.name.lower(): f.dataType.simpleString() for f in schema.fields}


class TierlogWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return SinkCommit(produce_batches(self.opts, iterator))


class TierlogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return SinkCommit(produce_batches(self.opts, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Rows are acknowledged by the broker in `write`; nothing is left to publish."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """At-least-once, like Spark's Kafka sink: written rows stay written."""


class TierlogDataSource(DataSource):
    """`spark.read.format("tierlog")`: Spark's Kafka source options, tiered reads."""

    @classmethod
    def name(cls) -> str:
        return "tierlog"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return spark_ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return TierlogBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TierlogStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise OptionError("save mode overwrite is not allowed for tierlog; use append")
        opts = parse_sink_options(self.options)
        check_sink_schema(_sink_fields(schema), opts)
        return TierlogWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        opts = parse_sink_options(self.options)
        check_sink_schema(_sink_fields(schema), opts)
        return TierlogStreamWriter(opts)
