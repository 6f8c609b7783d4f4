"""``tierlog delete-records``: Kafka's ``kafka-delete-records.sh``. Moves each listed
partition's log start offset up to the given offset (DeleteRecords on its leader); -1 means
the high watermark, i.e. everything written so far."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tierlog.cli.common import CLIENT_ID, read_json
from tierlog.cli.leaders import TopicPartition, delete_records, leaders_of
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode


def offsets_from(path: Path) -> dict[TopicPartition, int]:
    """``{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}``;
    a partition named twice is refused, as Kafka refuses it."""
    doc = read_json(path)
    out: dict[TopicPartition, int] = {}
    duplicates: list[str] = []
    try:
        version = int(doc.get("version", 1))
        if version != 1:
            raise SystemExit(f"tierlog: Not supported version field value {version}")
        for entry in doc["partitions"]:
            tp = (str(entry["topic"]), int(entry["partition"]))
            if tp in out:
                duplicates.append(f"{tp[0]}-{tp[1]}")
            out[tp] = int(entry["offset"])
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise SystemExit(f"tierlog: {path} is not an offset JSON file: {e!r}") from None
    if duplicates:
        raise SystemExit(
            "tierlog: Offset json file contains duplicate topic partitions: " + ",".join(duplicates)
        )
    if not out:
        raise SystemExit(f"tierlog: {path} names no partition")
    return out


def delete_records_cmd(c: WireConnection, a: argparse.Namespace) -> None:
    offsets = offsets_from(a.offset_json_file)
    md = c.call(ApiKey.METADATA, 12, topics=[], allow_auto_topic_creation=False)
    brokers = BrokerConnections(c, md, CLIENT_ID)
    print("Executing records delete operation")
    try:
        leaders = leaders_of(c, sorted({t for t, _ in offsets}))
        results = delete_records(brokers, leaders, offsets)
    finally:
        brokers.close()
    print("Records delete operation completed:")
    failed = False
    for (topic, p), (code, low) in sorted(results.items()):
        if code == 0:
            print(f"partition: {topic}-{p}\tlow_watermark: {low}")
        else:
            failed = True
            print(f"partition: {topic}-{p}\terror: {ErrorCode(code).name}")
    if failed:
        raise SystemExit(1)


def register(sub: Any) -> None:
    """The ``delete-records`` command."""
    d = sub.add_parser(
        "delete-records",
        help="move partitions' log start offsets up (kafka-delete-records.sh)",
    )
    d.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    d.add_argument(
        "--offset-json-file",
        required=True,
        type=Path,
        metavar="FILE",
        help='{"partitions":[{"topic":"t","partition":0,"offset":5}],"version":1}; '
        "offset -1 is the high watermark",
    )
    d.set_defaults(func=None, wire_fn=delete_records_cmd)
