"""``tierlog get-offsets``: Kafka's ``kafka-get-offsets.sh`` (GetOffsetShell). One
``topic:partition:offset`` line per partition matched, asked of each partition's leader."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from tierlog.cli.common import CLIENT_ID, supports
from tierlog.cli.leaders import TopicPartition, leaders_of, list_offsets
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

#: ``--time`` names and the ListOffsets timestamps they stand for, with the lowest
#: version that knows each.
NAMED_TIMES = {
    "latest": (-1, 7),
    "earliest": (-2, 7),
    "max-timestamp": (-3, 7),
    "earliest-local": (-4, 8),
    "latest-tiered": (-5, 9),
}

#: Kafka's ``--topic-partitions`` rule: an optional topic regex, then ``:N``, ``:N-M``
#: (upper bound exclusive), ``:N-`` or ``:-M``.
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")

PartitionFilter = Callable[[str, int], bool]


class OffsetsError(Exception):
    """Reported as Kafka's tool reports it: ``Error occurred: ...``, exit 1."""


def parse_time(value: str) -> tuple[int, int]:
    """(ListOffsets timestamp, the version it needs) for a ``--time`` value."""
    if value in NAMED_TIMES:
        return NAMED_TIMES[value]
    try:
        ts = int(value)
    except ValueError:
        raise OffsetsError(
            f"Malformed time argument {value}. Please use -1 or latest / -2 or earliest / "
            "-3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a "
            "specified long format timestamp"
        ) from None
    for named, version in NAMED_TIMES.values():
        if ts == named:
            return ts, version
    return ts, 7


def _topic_regex(pattern: str) -> re.Pattern[str]:
    """Kafka's ``IncludeList``: a Java regex matched against the whole name, where a comma
    separates alternatives."""
    try:
        return re.compile(pattern.strip().replace(",", "|"))
    except re.error as e:
        raise OffsetsError(f"Invalid topic regex '{pattern}': {e}") from None


def partition_filter(a: argparse.Namespace) -> PartitionFilter:
    """The filter of ``--topic-partitions``, or of ``--topic`` and ``--partitions``."""
    if a.topic_partitions is not None:
        if a.topic is not None or a.partitions is not None:
            raise OffsetsError("--topic-partitions cannot be used with --topic or --partitions")
        rules: list[tuple[re.Pattern[str], int, int]] = []
        for spec in a.topic_partitions.split(","):
            m = _RULE.fullmatch(spec)
            if m is None:
                raise OffsetsError(f"Invalid rule specification: {spec}")
            topic, one, low, high = m.groups()
            regex = _topic_regex(topic or ".*")
            if one:
                rules.append((regex, int(one), int(one) + 1))
            else:
                rules.append((regex, int(low or 0), int(high) if high else 2**31 - 1))
        return lambda t, p: any(r.fullmatch(t) and lo <= p < hi for r, lo, hi in rules)
    regex = _topic_regex(a.topic if a.topic is not None else ".*")
    wanted: set[int] = set()
    if a.partitions:
        try:
            wanted = {int(x) for x in a.partitions.split(",")}
        except ValueError:
            raise OffsetsError(
                "--partitions expects a comma separated list of numeric partition ids, but "
                f"received: {a.partitions}"
            ) from None
    return lambda t, p: bool(regex.fullmatch(t)) and (not wanted or p in wanted)


def get_offsets(c: WireConnection, a: argparse.Namespace) -> None:
    try:
        _get_offsets(c, a)
    except OffsetsError as e:
        raise SystemExit(f"Error occurred: {e}") from None


def _get_offsets(c: WireConnection, a: argparse.Namespace) -> None:
    timestamp, version = parse_time(a.time)
    allowed = partition_filter(a)
    md = c.call(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False)
    matched: list[TopicPartition] = [
        (str(t.name), int(p.partition_index))
        for t in md.topics
        if not (a.exclude_internal_topics and t.is_internal)
        for p in t.partitions
        if allowed(str(t.name), int(p.partition_index))
    ]
    if not matched:
        raise OffsetsError("Could not match any topic-partitions with the specified filters")
    if version > 7 and not supports(c, ApiKey.LIST_OFFSETS, version):
        raise OffsetsError(f"The broker does not serve ListOffsets v{version} for --time {a.time}")
    brokers = BrokerConnections(c, md, CLIENT_ID)
    try:
        leaders = leaders_of(c, sorted({t for t, _ in matched}))
        answers = list_offsets(brokers, leaders, matched, timestamp, version)
    finally:
        brokers.close()
    for (topic, p), answer in sorted(answers.items(), key=lambda kv: f"{kv[0][0]}-{kv[0][1]}"):
        if answer.error_code != 0:
            print(
                f"Skip getting offsets for topic-partition {topic}-{p} due to error: "
                f"{ErrorCode(answer.error_code).name}",
                file=sys.stderr,
            )
        elif answer.offset != -1:
            print(f"{topic}:{p}:{answer.offset}")


def register(sub: Any) -> None:
    """The ``get-offsets`` command."""
    g = sub.add_parser("get-offsets", help="offsets of topic partitions (kafka-get-offsets.sh)")
    g.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    g.add_argument(
        "--topic-partitions",
        metavar="PATTERNS",
        help="comma-separated topic-regex:partitions rules, e.g. t1:1,t2:0-3,t3,t4:5-,t5:-3",
    )
    g.add_argument("--topic", help="a topic, or a regular expression; all topics if absent")
    g.add_argument("--partitions", metavar="IDS", help="comma-separated partition ids")
    g.add_argument(
        "--time",
        default="latest",
        metavar="TIME",
        help="-1/latest (default), -2/earliest, -3/max-timestamp, -4/earliest-local, "
        "-5/latest-tiered, or a timestamp in ms: the first offset at or after it",
    )
    g.add_argument(
        "--exclude-internal-topics", action="store_true", help="leave out internal topics"
    )
    g.set_defaults(func=None, wire_fn=get_offsets)
