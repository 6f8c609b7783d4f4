"""Reader options of the `tierlog` format, parsed and checked the way Spark's Kafka source does.

Spark hands options over as a case-insensitive string map; here they become typed values
once, on the driver, so a typo fails the query before any task runs, with Spark's wording
where Spark has a rule. Offsets use Kafka's sentinels: -2 earliest, -1 latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

EARLIEST = -2
LATEST = -1

TP = tuple[str, int]

BOOTSTRAP = "kafka.bootstrap.servers"
RSM_CONFIG_PREFIX = "tierlog.rsm.config."
RSM_CLASS = "tierlog.rsm.class"
LOG_DIR = "tierlog.log.dir"
REMOTE_READS = "tierlog.remote.reads"
SPLIT_BYTES = "tierlog.split.bytes"
CATALOG = "tierlog.catalog"
CATALOGS = ("auto", "broker", "bucket")
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024

# Spark refuses these because the source manages them itself.
_REFUSED_KAFKA = {
    "auto.offset.reset": "Set the source option 'startingOffsets' instead",
    "key.deserializer": "Keys are always returned as binary",
    "value.deserializer": "Values are always returned as binary",
    "enable.auto.commit": "The source does not commit offsets to Kafka",
    "interceptor.classes": "Interceptors are not supported",
}


class OptionError(ValueError):
    """An invalid or conflicting option; the message names it."""


@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TP, ...]


Subscription = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True)
class OffsetBound:
    """`earliest` / `latest` (as `default`) or explicit per-partition offsets from JSON."""

    default: int
    explicit: Mapping[TP, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TimestampBound:
    """Offsets found by timestamp: one for every partition, or per partition from JSON.

    `strategy` is Spark's `startingOffsetsByTimestampStrategy`: with `error` a partition
    with no record at or after the timestamp fails the query, with `latest` it resolves
    to the partition's end.
    """

    everywhere: int | None
    explicit: Mapping[TP, int] = field(default_factory=dict)
    strategy: Literal["error", "latest"] = "error"


Bound = OffsetBound | TimestampBound


@dataclass(frozen=True)
class SourceOptions:
    subscription: Subscription
    starting: Bound
    ending: Bound
    bootstrap: str | None = None
    kafka_params: Mapping[str, str] = field(default_factory=dict)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    max_records_per_partition: int | None = None
    rsm_class: str | None = None
    rsm_config: Mapping[str, str] = field(default_factory=dict)
    log_dir: str | None = None
    remote_reads: bool = True
    split_bytes: int = DEFAULT_SPLIT_BYTES
    # where the driver learns what exists: the broker, the bucket's manifests, or the
    # broker unless it cannot be reached and a storage plugin is configured ("auto")
    catalog: str = "auto"
    # Spark's `kafka.isolation.level`: read_committed stops at the LSO and drops the records
    # of aborted transactions, on the broker path and straight from the bucket
    read_committed: bool = False


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"option '{key}' must be true or false, got {raw!r}")
    return value == "true"


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    raw = opts.get(key.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option '{key}' must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option '{key}' must be a positive integer, got {raw!r}")
    return value


def _json_object(key: str, raw: str) -> dict[str, object]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{key}' is not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise OptionError(f"option '{key}' must be a JSON object, got {raw!r}")
    return parsed


def partition_map(key: str, raw: str) -> dict[TP, int]:
    """`{"topic":{"0":23,"1":-1}}` -> {(topic, 0): 23, (topic, 1): -1}."""
    out: dict[TP, int] = {}
    for topic, parts in _json_object(key, raw).items():
        if not isinstance(parts, dict):
            raise OptionError(f"option '{key}': partitions of {topic!r} must be an object")
        for p, value in parts.items():
            try:
                out[(topic, int(p))] = int(value)
            except (TypeError, ValueError):
                raise OptionError(f"option '{key}': bad entry {topic!r}/{p!r}") from None
    return out


def partition_map_json(offsets: Mapping[TP, int]) -> dict[str, dict[str, int]]:
    """The inverse of `partition_map`, as a dict ready for `json.dumps` (sorted, stable)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), value in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = value
    return out


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern', 'assign' "
            f"must be specified, got {len(given)}"
        )
    (kind,) = given
    raw = opts[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(f"no topics to subscribe to in option 'subscribe': {raw!r}")
        return Subscribe(topics)
    if kind == "subscribepattern":
        if not raw.strip():
            raise OptionError("pattern to subscribe is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return SubscribePattern(raw)
    parts: list[TP] = []
    for topic, plist in _json_object("assign", raw).items():
        if not isinstance(plist, list) or not all(isinstance(p, int) for p in plist):
            raise OptionError(f"option 'assign': partitions of {topic!r} must be a list of ints")
        parts.extend((topic, p) for p in plist)
    if not parts:
        raise OptionError(f"no partitions to assign in option 'assign': {raw!r}")
    return Assign(tuple(sorted(set(parts))))


def _bound(opts: Mapping[str, str], side: Literal["starting", "ending"], default: int) -> Bound:
    strategy_raw = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_raw not in ("error", "latest"):
        raise OptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be error or latest, "
            f"got {strategy_raw!r}"
        )
    strategy: Literal["error", "latest"] = "error" if strategy_raw == "error" else "latest"
    ts_key = f"{side}timestamp"
    by_ts_key = f"{side}offsetsbytimestamp"
    if ts_key in opts:  # Spark's precedence: global timestamp, then per partition, then offsets
        try:
            ts = int(opts[ts_key])
        except ValueError:
            raise OptionError(f"option '{side}Timestamp' must be an integer (ms)") from None
        return TimestampBound(ts, {}, strategy)
    if by_ts_key in opts:
        return TimestampBound(
            None, partition_map(f"{side}OffsetsByTimestamp", opts[by_ts_key]), strategy
        )
    raw = opts.get(f"{side}offsets")
    if raw is None:
        return OffsetBound(default)
    word = raw.strip().lower()
    if word == "earliest":
        return OffsetBound(EARLIEST)
    if word == "latest":
        return OffsetBound(LATEST)
    return OffsetBound(default, partition_map(f"{side}Offsets", raw))


def _check_batch_bounds(starting: Bound, ending: Bound) -> None:
    if isinstance(starting, OffsetBound):
        if starting.default == LATEST and not starting.explicit:
            raise OptionError("starting offset can't be latest for batch queries on tierlog")
        if any(v == LATEST for v in starting.explicit.values()):
            raise OptionError(
                "startingOffsets for batch queries cannot use -1 (latest) for a partition"
            )
    if isinstance(ending, OffsetBound):
        if ending.default == EARLIEST and not ending.explicit:
            raise OptionError("ending offset can't be earliest for batch queries on tierlog")
        if any(v == EARLIEST for v in ending.explicit.values()):
            raise OptionError(
                "endingOffsets for batch queries cannot use -2 (earliest) for a partition"
            )


def parse_source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = {k.lower(): v for k, v in raw.items()}
    bootstrap = opts.get(BOOTSTRAP)
    log_dir = opts.get(LOG_DIR)
    catalog = opts.get(CATALOG, "auto").strip().lower()
    if catalog not in CATALOGS:
        raise OptionError(f"option '{CATALOG}' must be one of {', '.join(CATALOGS)}")
    if not bootstrap and not log_dir and catalog != "bucket":
        raise OptionError(
            f"option '{BOOTSTRAP}' must be specified for configuring the Kafka consumer "
            f"(or '{LOG_DIR}' to read segment files without a broker, or "
            f"'{CATALOG}=bucket' to read the object store alone)"
        )
    kafka_params: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith("kafka.") and key != BOOTSTRAP:
            name = key[len("kafka.") :]
            if name in _REFUSED_KAFKA:
                raise OptionError(f"Kafka option '{name}' is not supported. {_REFUSED_KAFKA[name]}")
            kafka_params[name] = value
    starting = _bound(opts, "starting", LATEST if streaming else EARLIEST)
    if streaming and any(
        k in opts for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
    ):
        raise OptionError("ending offset not valid in streaming queries")
    ending = OffsetBound(LATEST) if streaming else _bound(opts, "ending", LATEST)
    if not streaming:
        _check_batch_bounds(starting, ending)
    rsm_config = {
        k[len(RSM_CONFIG_PREFIX) :]: v
        for k, v in raw.items()
        if k.lower().startswith(RSM_CONFIG_PREFIX)
    }
    rsm_class = opts.get(RSM_CLASS)
    if rsm_class is None and "storage.url" in rsm_config:
        rsm_class = "objectstore"  # only the object store takes a storage.url
    if catalog == "bucket" and rsm_class is None:
        raise OptionError(
            f"option '{CATALOG}=bucket' needs the storage plugin: set "
            f"'{RSM_CONFIG_PREFIX}storage.url' (and credentials or keys as needed)"
        )
    isolation = kafka_params.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_committed", "read_uncommitted"):
        raise OptionError(
            "option 'kafka.isolation.level' must be read_committed or read_uncommitted, "
            f"got '{isolation}'"
        )
    return SourceOptions(
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        bootstrap=bootstrap,
        kafka_params=kafka_params,
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_positive(opts, "minPartitions"),
        max_offsets_per_trigger=_positive(opts, "maxOffsetsPerTrigger"),
        max_records_per_partition=_positive(opts, "maxRecordsPerPartition"),
        rsm_class=rsm_class,
        rsm_config=rsm_config,
        log_dir=log_dir,
        remote_reads=_bool(opts, REMOTE_READS, True),
        split_bytes=_positive(opts, SPLIT_BYTES) or DEFAULT_SPLIT_BYTES,
        catalog=catalog,
        read_committed=isolation == "read_committed",
    )
