"""The options of ``tierlog transactions``, as Kafka 3.7's ``kafka-transactions.sh`` takes
them (one sub-command each), and the checks Kafka makes of them, run before connecting.

``list --state`` and ``list --producer-id`` are tierlog's: Kafka 3.7's ``list`` takes no
filter, but its admin client has both (``ListTransactionsOptions``) and the broker applies
them, which saves an operator a grep over a large cluster's listing."""

from __future__ import annotations

import argparse
from typing import Any

from tierlog.cli.common import UsageError, usage_errors

#: Transaction states a coordinator reports (Kafka's ``TransactionState`` names).
STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
    "Dead",
)

#: ``find-hanging``'s default ``--max-transaction-timeout``, in minutes (Kafka's).
DEFAULT_MAX_TIMEOUT_MIN = 15


def check_args(a: argparse.Namespace) -> None:
    """Kafka's checks of each sub-command (its ``execute`` makes them first thing)."""
    with usage_errors():
        _check(a)


def _check(a: argparse.Namespace) -> None:
    if a.txn_command == "list":
        unknown = [s for s in a.state or () if s not in STATES]
        if unknown:
            raise UsageError(
                f"Invalid state(s) {', '.join(unknown)}. Valid states are: {', '.join(STATES)}"
            )
    elif a.txn_command == "abort":
        if a.start_offset is None and a.producer_id is None:
            raise UsageError(
                "The transaction to abort must be identified either with --start-offset (for "
                "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
                "--coordinator-epoch (for older brokers)"
            )
        if a.start_offset is None:
            if a.producer_epoch is None:
                raise UsageError("Missing required argument --producer-epoch")
            if a.coordinator_epoch is None:
                raise UsageError("Missing required argument --coordinator-epoch")
    elif a.txn_command == "find-hanging":
        if a.topic is None and a.broker_id is None:
            raise UsageError(
                "The `find-hanging` command requires either --topic or --broker-id to limit "
                "the scope of the search"
            )
        if a.partition is not None and a.topic is None:
            raise UsageError("The --partition argument requires --topic to be provided")


def register(sub: Any, run: Any) -> None:
    """The ``transactions`` parser and its five sub-commands."""
    p = sub.add_parser(
        "transactions",
        help="list, describe, find and abort (hanging) transactions (kafka-transactions.sh)",
        description="This tool is used to analyze the transactional state of producers in the "
        "cluster. It can be used to detect and recover from hanging transactions.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="host:port")
    cmds = p.add_subparsers(dest="txn_command", required=True, metavar="COMMAND")

    ls = cmds.add_parser("list", help="list transactions")
    ls.add_argument(
        "--state",
        action="append",
        metavar="STATE",
        help="only transactions in this state (repeatable; tierlog's, not Kafka 3.7's)",
    )
    ls.add_argument(
        "--producer-id",
        action="append",
        type=int,
        metavar="ID",
        help="only this producer's transactions (repeatable; tierlog's, not Kafka 3.7's)",
    )

    d = cmds.add_parser(
        "describe",
        help="describe the state of an active transactional-id",
        description="Describe the state of an active transactional-id.",
    )
    d.add_argument("--transactional-id", required=True, help="transactional id")

    dp = cmds.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    dp.add_argument(
        "--broker-id",
        type=int,
        help="optional broker id to describe the producer state on a specific replica",
    )
    dp.add_argument("--topic", required=True, help="topic name")
    dp.add_argument("--partition", required=True, type=int, help="partition number")

    ab = cmds.add_parser(
        "abort", help="abort a hanging transaction (requires administrative privileges)"
    )
    ab.add_argument("--topic", required=True, help="topic name")
    ab.add_argument("--partition", required=True, type=int, help="partition number")
    new = ab.add_argument_group(
        "Brokers on versions 3.0 and above",
        "For newer brokers, only the start offset of the transaction to be aborted is required",
    )
    new.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    old = ab.add_argument_group(
        "Brokers on versions older than 3.0",
        "For older brokers, you must provide all of these arguments",
    )
    old.add_argument("--producer-id", type=int, help="producer id")
    old.add_argument("--producer-epoch", type=int, help="producer epoch")
    old.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")

    fh = cmds.add_parser("find-hanging", help="find hanging transactions")
    fh.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    fh.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TIMEOUT_MIN,
        metavar="MINUTES",
        help="maximum transaction timeout in minutes to limit the scope of the search "
        f"({DEFAULT_MAX_TIMEOUT_MIN} minutes by default)",
    )
    fh.add_argument(
        "--topic", help="topic name to limit search to (required if --partition is specified)"
    )
    fh.add_argument("--partition", type=int, help="partition number")
    p.set_defaults(func=None, wire_fn=run, check_args=check_args)
