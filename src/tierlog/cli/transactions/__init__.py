"""``tierlog transactions``: Kafka 3.7's ``kafka-transactions.sh`` over the wire
(ListTransactions, FindCoordinator, DescribeTransactions, DescribeProducers,
WriteTxnMarkers), the operator's way to find a transaction that holds read_committed
consumers at its first offset and to abort it.

Modules: ``options`` (the sub-commands and Kafka's checks), ``admin`` (the requests, each
on the broker that must answer it), ``commands`` (``list``, ``describe``,
``describe-producers``, ``abort``), ``hanging`` (``find-hanging``). Every failure is
reported as ``Error: ...`` on stderr with exit status 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from tierlog.cli.transactions import commands, hanging, options
from tierlog.cli.transactions.admin import TxnAdmin, TxnCommandError
from tierlog.client import WireConnection

_COMMANDS: dict[str, Callable[[TxnAdmin, argparse.Namespace], None]] = {
    "list": commands.list_transactions,
    "describe": commands.describe,
    "describe-producers": commands.describe_producers,
    "abort": commands.abort,
    "find-hanging": hanging.find_hanging,
}


def run(c: WireConnection, a: argparse.Namespace) -> None:
    """One sub-command (its options checked by ``options.check_args`` before connecting)."""
    admin = TxnAdmin(c)
    try:
        _COMMANDS[a.txn_command](admin, a)
    except TxnCommandError as e:
        raise SystemExit(f"Error: {e}") from None
    except OSError as e:
        raise SystemExit(f"Error: a broker could not be reached: {e}") from None
    finally:
        admin.close()


def register(sub: Any) -> None:
    """The ``transactions`` command."""
    options.register(sub, run)
