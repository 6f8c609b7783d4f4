"""``tierlog serve``: run the broker from ``server.properties`` and ``--override``s."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from tierlog.config.broker import broker_config_from_sources
from tierlog.config.definitions import ConfigError

#: Used by ``tierlog serve`` without ``--config``: a broker that runs out of the box.
EMBEDDED_DEFAULTS = (
    "log.dirs=./data",
    "listeners=PLAINTEXT://127.0.0.1:9092",
)


def serve(a: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, a.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for name in a.debug or []:
        logging.getLogger(name).setLevel(logging.DEBUG)
    overrides = list(a.override or [])
    if a.config is None:
        overrides = [*EMBEDDED_DEFAULTS, *overrides]
    try:
        config = broker_config_from_sources(a.config, overrides)
    except ConfigError as e:
        print(f"tierlog: config error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"tierlog: cannot read config: {e}", file=sys.stderr)
        return 2
    from tierlog.server.broker import run
    from tierlog.server.state_files import StateFileError
    from tierlog.server.tiering import TieringStartupError

    try:
        run(config)
    except ConfigError as e:
        print(f"tierlog: config error: {e}", file=sys.stderr)
        return 2
    except TieringStartupError as e:
        print(f"tierlog: tiered storage cannot start: {e}", file=sys.stderr)
        return 1
    except StateFileError as e:
        print(f"tierlog: broker state file: {e}", file=sys.stderr)
        return 1
    return 0


def register(sub: Any) -> None:
    """The ``serve`` command."""
    s = sub.add_parser("serve", help="run the broker")
    s.add_argument("--config", type=Path, help="server.properties file")
    s.add_argument("--override", action="append", metavar="KEY=VALUE", help="repeatable")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    s.add_argument(
        "--debug",
        action="append",
        metavar="LOGGER",
        help="log this logger and its children at debug (repeatable), e.g. "
        "tierlog.server.txn.coordinator.transitions",
    )
    s.set_defaults(func=serve)
