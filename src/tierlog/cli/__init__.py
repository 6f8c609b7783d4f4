"""Command line: ``tierlog serve | topics ... | reassign-partitions |
leader-election | consumer-groups | configs | get-offsets | delete-records | transactions |
log-dirs | remote segments | dump-log | keys rewrap | audit | usage | docs``.

The wire commands talk to a running broker over the Kafka wire protocol (our own codec
over a plain socket, ``tierlog.client``), so they work against any Kafka-compatible broker
and exercise the same code paths as real clients. Each command lives in its own module and
registers its parser here; a wire command sets ``wire_fn(connection, args)``, which ``main``
calls on a connection to the bootstrap broker.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tierlog.cli import (
    configs,
    consumer_groups,
    delete_records,
    election,
    get_offsets,
    log_dirs,
    offline,
    reassignment,
    remote,
    serve,
    topics,
    transactions,
)
from tierlog.cli.common import CLIENT_ID
from tierlog.client import WireConnection

__all__ = ["CLIENT_ID", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The whole ``tierlog`` parser, commands in the order ``tierlog -h`` lists them."""
    p = argparse.ArgumentParser(prog="tierlog", description="Kafka-compatible tiered log broker")
    sub = p.add_subparsers(dest="command", required=True)
    serve.register(sub)
    topics.register(sub)
    reassignment.register(sub)
    election.register(sub)
    consumer_groups.register(sub)
    configs.register(sub)
    get_offsets.register(sub)
    delete_records.register(sub)
    transactions.register(sub)
    log_dirs.register(sub)
    remote.register(sub)
    offline.register_dump_log(sub)
    offline.register_delegated(sub)
    offline.register_docs(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["keys", "rewrap"]:  # its own options are parsed by the tool itself
        return offline.keys_rewrap(argv[2:])
    if argv[:1] and argv[0] in offline.SPARK_JOBS:  # their own options are parsed by the jobs
        return offline.spark_job(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    args.argv = argv[1:]  # the command's own arguments, which some errors quote
    check_args = getattr(args, "check_args", None)
    if check_args is not None:  # bad options are refused before any connection
        check_args(args)
    if getattr(args, "wire_fn", None) is not None:
        try:
            client = WireConnection.to_bootstrap(args.bootstrap_server, client_id=CLIENT_ID)
        except OSError as e:
            print(f"tierlog: cannot reach {args.bootstrap_server}: {e}", file=sys.stderr)
            return 1
        with client:
            try:
                args.wire_fn(client, args)
            except ConnectionError as e:
                print(f"tierlog: connection to {args.bootstrap_server} lost: {e}", file=sys.stderr)
                return 1
        return 0
    return int(args.func(args))
