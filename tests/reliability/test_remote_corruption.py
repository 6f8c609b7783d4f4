"""Scenario 4: corrupt remote data. Objects of uploaded segments are damaged in the bucket
(moto, through boto3): a flipped byte in the ``.log`` chunk data, a truncated ``.log``, a
manifest that does not parse, a missing ``.indexes`` blob. The broker is restarted so no cache
holds the good copies. Each damaged segment must give a precise error to the fetch that
reads it, and only to that partition of that fetch; healthy segments and partitions in the
same request are served, and the remote fetch error metric counts every failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import wait_until
from tests.helpers.wire import fetch_fields, fetch_partition, offsets_and_values
from tests.reliability.rel_helpers import index_of, must_create_topic, produce_values, record
from tests.reliability.s3_env import (
    Bucket,
    ServerProcess,
    metric,
    tiered_overrides,
    tiered_topic_configs,
)
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

TOPIC = "rot"
HEALTHY = "fine"
DAMAGE = ("flipped-byte", "flipped-last-byte", "truncated", "bad-manifest", "missing-indexes")
# (regression: a flipped byte used to be served as is, and a truncated object made the read
# continue in the next segment, silently skipping the missing records)


def _segment_starts(bucket: Bucket, topic: str) -> dict[int, str]:
    """Start offset -> object key stem (without extension) of every uploaded segment."""
    out: dict[int, str] = {}
    for k in bucket.object_keys():
        if f"/{topic}-" in k and k.endswith(".log"):
            stem = k[: -len(".log")]
            out[int(stem.rsplit("/", 1)[-1].split("-", 1)[0])] = stem
    return out


def _fetch_two(
    c: WireConnection, offset: int, healthy_offset: int
) -> dict[str, tuple[int, list[Any]]]:
    """A Fetch v12 naming the damaged topic and a healthy tiered topic, sent again while
    either partition comes back empty without an error, as a consumer fetches again: once
    one partition has records, a remote read of the other still running is left to the
    next Fetch (``remote.fetch.partial.wait.ms``). Each partition's first answer with
    records or an error (the offsets do not change between the Fetches), else its last."""
    topics = {TOPIC: [fetch_partition(0, offset)], HEALTHY: [fetch_partition(0, healthy_offset)]}
    deadline = time.monotonic() + 30
    answered: dict[str, tuple[int, list[Any]]] = {}
    while True:
        r = c.call(ApiKey.FETCH, 12, **fetch_fields(topics, max_bytes=4 << 20))
        last: dict[str, tuple[int, list[Any]]] = {}
        for t in r.responses:
            p = t.partitions[0]
            last[t.topic] = (int(p.error_code), offsets_and_values(bytes(p.records or b"")))
        for topic, (err, recs) in last.items():
            if topic not in answered and (err != 0 or recs):
                answered[topic] = (err, recs)
        if len(answered) == len(topics) or time.monotonic() >= deadline:
            return {**last, **answered}


def test_corrupt_remote_objects_fail_only_the_affected_fetch(
    broker_factory: Callable[..., BrokerProcess], moto: ServerProcess
) -> None:
    bucket = Bucket.create(moto.endpoint)
    b = broker_factory(tiered_overrides(bucket))
    for t in (TOPIC, HEALTHY):
        must_create_topic(b.bootstrap, t, 1, tiered_topic_configs())
        produce_values(b.bootstrap, t, range(4000), pad=200)
    wait_until(
        lambda: (
            len(_segment_starts(bucket, TOPIC)) >= 9 and len(_segment_starts(bucket, HEALTHY)) >= 3
        ),
        90,
        interval_s=0.3,
        what="uploads",
    )
    wait_until(
        lambda: not (b.log_dir / f"{TOPIC}-0" / "00000000000000000000.log").exists(),
        60,
        interval_s=0.3,
        what="local deletion of uploaded segments",
    )
    b.stop()
    starts = _segment_starts(bucket, TOPIC)
    ordered = sorted(starts)
    # segment 0 and 6.. stay healthy
    victims = dict(zip(DAMAGE, ordered[1 : 1 + len(DAMAGE)], strict=True))
    for how, start in victims.items():
        stem = starts[start]
        if how == "flipped-byte":
            data = bytearray(bucket.get(stem + ".log"))
            data[len(data) // 2] ^= 0x10  # lands in a base offset (not covered by the CRC)
            bucket.put(stem + ".log", bytes(data))
        elif how == "flipped-last-byte":
            data = bytearray(bucket.get(stem + ".log"))
            data[-1] ^= 0x01  # inside the last record: covered by the CRC
            bucket.put(stem + ".log", bytes(data))
        elif how == "truncated":
            data = bytearray(bucket.get(stem + ".log"))
            bucket.put(stem + ".log", bytes(data[: len(data) // 3]))
        elif how == "bad-manifest":
            bucket.put(stem + ".rsm-manifest", b"{not json \xff")
        else:
            bucket.delete(stem + ".indexes")
    b.start()
    errors_before = metric(b.metrics_url, "tierlog_remote_fetch_errors_total", topic=TOPIC)
    outcomes: dict[str, str] = {}
    latency: dict[str, float] = {}
    served_before_error: dict[str, int] = {}
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        for how, start in victims.items():
            # read the damaged segment like a consumer from its first offset: intact batches
            # come back in order, then a fetch fails; it never skips past the damage
            end = ordered[ordered.index(start) + 1]
            offset = start
            t0 = time.monotonic()
            while True:
                got = _fetch_two(c, offset, 0)
                herr, hrecs = got[HEALTHY]
                assert herr == 0 and hrecs and hrecs[0][0] == 0, (how, ErrorCode(herr))
                err, recs = got[TOPIC]
                if err != 0:
                    break
                assert recs and recs[0][0] <= offset, (how, offset, recs[:1])
                bad = [(o, v[:12] if v else v) for o, v in recs if index_of(v) != o]
                assert not bad, (how, offset, len(recs), bad[:3])
                offset = recs[-1][0] + 1
                assert offset < end, f"{how}: read past the damage into the next segment"
            latency[how] = time.monotonic() - t0
            assert not recs, (how, recs[:1])
            outcomes[how] = ErrorCode(err).name
            served_before_error[how] = offset - start
            assert latency[how] < 20, (how, latency[how])
        # healthy segments of the damaged partition still read, value i at offset i
        for start in (ordered[0], *ordered[1 + len(DAMAGE) :]):
            err, recs = _fetch_two(c, start, 0)[TOPIC]
            assert err == 0 and recs, (start, ErrorCode(err))
            assert all(index_of(v) == o for o, v in recs), start
    errors = metric(b.metrics_url, "tierlog_remote_fetch_errors_total", topic=TOPIC) - errors_before
    assert errors >= len(victims), errors
    assert b.running
    record(
        "remote.corruption",
        injections=len(victims),
        errors_by_damage=outcomes,
        fetch_latency_s={k: round(v, 3) for k, v in latency.items()},
        records_served_before_error=served_before_error,
        fetch_error_metric_delta=errors,
        healthy_segments_served=1 + len(ordered[1 + len(DAMAGE) :]),
    )
