"""Where the built-in plugins keep the remote tier when a broker configures no location."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def embedded_root(log_dirs: Sequence[Path]) -> Path:
    """``<first log dir>-remote``: next to the data, not inside it, so the log engine never
    mistakes remote files for partitions and deleting the data dir keeps the remote copy."""
    first = log_dirs[0]
    return first.with_name(first.name + "-remote")
