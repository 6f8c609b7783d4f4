"""Timestamp bounds planned without a broker, from segments the log engine wrote.

Spark's Kafka source resolves `startingTimestamp` / `endingTimestamp` with ListOffsets:
the first offset whose record timestamp is >= the target. With no broker to ask, the
driver works it out from the segments; it must agree with a brute-force scan even when
timestamps go backwards inside and across batches and segments.
"""

from __future__ import annotations

import itertools
import json
import random
import uuid
from pathlib import Path

import pytest

from tests.spark.spark_batches import Rec, build
from tierlog.log import LogManager, TopicPartition
from tierlog.log.config import LogConfig
from tierlog.spark.driver import Catalog
from tierlog.spark.options import OptionError, parse_source_options
from tierlog.spark.timestamps import parse_time_index

T0 = 1_700_000_000_000
PARTS = 2


@pytest.fixture(scope="module")
def shuffled_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, list[Rec]]]:
    """Timestamps rise overall but jump back by up to 40 ms inside and across batches."""
    root = tmp_path_factory.mktemp("ts-logs")
    cfg = LogConfig(segment_bytes=8 * 1024, index_interval_bytes=256)
    mgr = LogManager([root], cfg)
    mgr.load()
    rng = random.Random(5)
    data: dict[int, list[Rec]] = {}
    for p in range(PARTS):
        log = mgr.create_log(TopicPartition("ts", p), uuid.uuid4(), cfg)
        recs = [Rec(o, T0 + 10 * o - rng.randrange(40), None, b"v%d" % o * 8) for o in range(1200)]
        for i in range(0, len(recs), 25):
            log.append_as_leader(build(recs[i : i + 25], (i // 25) % 5), leader_epoch=0)
        data[p] = recs
    mgr.shutdown()
    return root, data


def first_at_or_after(recs: list[Rec], target: int) -> int | None:
    return next((r.offset for r in recs if r.timestamp >= target), None)


def resolve(root: Path, side: str, **opts: str) -> dict[int, int]:
    o = parse_source_options(
        {"tierlog.log.dir": str(root), "subscribe": "ts", **opts}, streaming=False
    )
    with Catalog(o) as c:
        views = c.views()
        bound = o.starting if side == "starting" else o.ending
        return {tp[1]: off for tp, off in c.resolve(bound, views, side).items()}


def test_segments_have_time_indexes_to_start_from(
    shuffled_log: tuple[Path, dict[int, list[Rec]]],
) -> None:
    root, _ = shuffled_log
    logs = sorted((root / "ts-0").glob("*.log"))
    assert len(logs) >= 3
    entries = parse_time_index(logs[1].with_suffix(".timeindex").read_bytes(), int(logs[1].stem))
    assert len(entries) >= 5  # the lookups below start mid-segment, not at its first batch
    assert all(a < b for a, b in itertools.pairwise(entries))


def test_starting_timestamp_is_the_first_offset_at_or_after_it(
    shuffled_log: tuple[Path, dict[int, list[Rec]]],
) -> None:
    root, data = shuffled_log
    last = min(max(r.timestamp for r in data[p]) for p in range(PARTS))
    targets = [T0 - 5, T0 + 3, T0 + 2_345, T0 + 6_001, T0 + 9_999, last - 30, last]
    for target in targets:
        got = resolve(root, "starting", startingTimestamp=str(target))
        want = {p: first_at_or_after(data[p], target) for p in range(PARTS)}
        assert got == want, target


def test_per_partition_json_forms_and_the_no_match_rules(
    shuffled_log: tuple[Path, dict[int, list[Rec]]],
) -> None:
    root, data = shuffled_log
    ends = {p: len(data[p]) for p in range(PARTS)}
    beyond = max(r.timestamp for p in data for r in data[p]) + 1
    by_ts = json.dumps({"ts": {"0": T0 + 4_321, "1": beyond}})
    # ending: no record at or after the timestamp means the end of the data, as in Spark
    got = resolve(root, "ending", endingOffsetsByTimestamp=by_ts)
    assert got == {0: first_at_or_after(data[0], T0 + 4_321), 1: ends[1]}
    # starting: an error by default, the end with startingOffsetsByTimestampStrategy=latest
    with pytest.raises(OptionError, match="ts-1 has a timestamp >="):
        resolve(root, "starting", startingOffsetsByTimestamp=by_ts)
    got = resolve(
        root,
        "starting",
        startingOffsetsByTimestamp=by_ts,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert got == {0: first_at_or_after(data[0], T0 + 4_321), 1: ends[1]}
