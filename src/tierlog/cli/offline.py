"""The commands that need no broker: ``dump-log``, ``docs``, and the tools whose own parsers
live elsewhere (``keys rewrap`` in the object-store plugin, ``audit`` / ``usage`` in Spark),
imported only when they run so the CLI loads neither a plugin nor pyspark."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def dump_log(a: argparse.Namespace) -> int:
    from tierlog.log.dump import dump_file

    try:
        for line in dump_file(Path(a.path), deep=not a.headers_only):
            print(line)
    except BrokenPipeError:  # reader went away (e.g. `| head`)
        return 0
    except (OSError, ValueError) as e:
        print(f"tierlog: cannot dump {a.path}: {e}", file=sys.stderr)
        return 1
    return 0


def docs(a: argparse.Namespace) -> int:
    from tierlog.server.operations_doc import render_operations_doc

    text = render_operations_doc()
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


#: ``tierlog keys rewrap`` lives in the object-store plugin; it is imported by module path
#: only when the command runs, so the CLI (and the broker it starts) never loads a plugin.
KEYS_REWRAP_MODULE = "tierlog.storage.objectstore.rewrap"


def keys_rewrap(argv: Sequence[str]) -> int:
    import importlib

    module = importlib.import_module(KEYS_REWRAP_MODULE)
    return int(module.main(list(argv)))


#: ``tierlog audit`` / ``tierlog usage`` are Spark jobs; imported only when they run.
SPARK_JOBS = {"audit", "usage"}


def spark_job(name: str, argv: Sequence[str]) -> int:
    from tierlog.spark import jobs

    return int(jobs.audit_main(argv) if name == "audit" else jobs.usage_main(argv))


def register_dump_log(sub: Any) -> None:
    """The ``dump-log`` command."""
    d = sub.add_parser("dump-log", help="decode a segment or index file")
    d.add_argument("path", help=".log, .index, .timeindex, .txnindex, .snapshot, checkpoint")
    d.add_argument("--headers-only", action="store_true", help="batches only, not records")
    d.set_defaults(func=dump_log)


def register_delegated(sub: Any) -> None:
    """``keys rewrap``, ``audit`` and ``usage``: listed in the help only; ``main`` hands
    their arguments to the tools' own parsers before this parser sees them."""
    k = sub.add_parser("keys", help="encryption key ring maintenance (object-store plugin)")
    ksub = k.add_subparsers(dest="action", required=True)
    ksub.add_parser(
        "rewrap",
        add_help=False,
        help="re-wrap segment data keys onto the active key (see `tierlog keys rewrap -h`)",
    )
    for name, what in (
        ("audit", "check the remote tier against its metadata (Spark job)"),
        ("usage", "local/remote bytes and cost per partition (Spark job)"),
    ):
        sub.add_parser(name, add_help=False, help=f"{what}; see `tierlog {name} -h`")


def register_docs(sub: Any) -> None:
    """The ``docs`` command."""
    o = sub.add_parser("docs", help="render docs/operations.md")
    o.add_argument("--output")
    o.set_defaults(func=docs)
