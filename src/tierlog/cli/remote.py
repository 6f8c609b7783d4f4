"""``tierlog remote segments``: the remote segment metadata of a topic, read from
``__remote_log_metadata`` as a client (``tierlog.remote_segments``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tierlog.client import WireConnection


def remote_segments_cmd(c: WireConnection, a: argparse.Namespace) -> None:
    from tierlog.remote_segments import RemoteSegmentsError, remote_segments

    try:
        rows = remote_segments(c, a.topic, a.partition)
    except RemoteSegmentsError as e:
        raise SystemExit(f"tierlog: {e}") from None
    if a.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return
    print("PARTITION\tSTART\tEND\tSTATE\tSIZE\tMAX_TIMESTAMP\tBROKER\tSEGMENT_ID")
    for r in rows:
        print(
            f"{r['partition']}\t{r['start_offset']}\t{r['end_offset']}\t{r['state']}"
            f"\t{r['size_bytes']}\t{r['max_timestamp_ms']}\t{r['broker_id']}\t{r['segment_id']}"
        )


def register(sub: Any) -> None:
    """The ``remote`` command and its ``segments`` action."""
    r = sub.add_parser("remote", help="the remote tier, read from __remote_log_metadata")
    rsub = r.add_subparsers(dest="action", required=True)
    rs = rsub.add_parser("segments", help="remote segment metadata of a topic")
    rs.add_argument("topic")
    rs.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    rs.add_argument("--partition", type=int)
    rs.add_argument("--json", action="store_true")
    rs.set_defaults(func=None, wire_fn=remote_segments_cmd)
