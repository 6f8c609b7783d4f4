"""Arguments, the run and the output shared by the `tierlog audit` and `tierlog usage` jobs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from tierlog.spark.jobs.inventory import Inventory
from tierlog.spark.jobs.session import job_session
from tierlog.spark.options import OptionError
from tierlog.spark.remote import broker_rsm_spec
from tierlog.spark.wire import BrokerClient


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--master", help="Spark master (default: the active session, or local[2])")
    p.add_argument(
        "--rsm-class", help="storage plugin (default: the broker's remote.log.storage...)"
    )
    p.add_argument(
        "--rsm-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="plugin setting the broker does not disclose (credentials, private keys)",
    )


def rsm_overrides(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise OptionError(f"--rsm-config expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def discover(bootstrap: str, rsm_class: str | None, overrides: Mapping[str, str]) -> Inventory:
    with BrokerClient(bootstrap) as client:
        spec = broker_rsm_spec(client, rsm_class, overrides)
    if spec is None:
        raise OptionError("the broker names no storage plugin; pass --rsm-class")
    return Inventory.of(spec)


_T = TypeVar("_T")


def run_job(
    args: argparse.Namespace, app_name: str, job: Callable[[Any, Inventory], _T]
) -> tuple[Inventory, _T]:
    """Find the storage plugin's inventory from the common arguments, then run ``job`` with
    a Spark session and that inventory; a session this call creates is stopped after."""
    inventory = discover(args.bootstrap_server, args.rsm_class, rsm_overrides(args.rsm_config))
    spark, created = job_session(app_name, args.master)
    try:
        return inventory, job(spark, inventory)
    finally:
        if created:
            spark.stop()


def print_json(doc: Any) -> None:
    json.dump(doc, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A table via rich when installed, else aligned plain text."""
    cells = [[("" if v is None else str(v)) for v in r] for r in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
        print(title)
        print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
        for r in cells:
            print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
        return
    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in cells:
        table.add_row(*r)
    Console(width=200).print(table)


def error_exit(prog: str, exc: Exception) -> int:
    print(f"tierlog {prog}: {exc}", file=sys.stderr)
    return 1
