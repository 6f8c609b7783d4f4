"""Crash-safe replacement of small files: the one primitive every checkpoint relies on.

A checkpoint, snapshot or state file is rewritten whole: write a temp file, fsync it, rename
it over the old one, then fsync the directory so the rename itself is durable. A crash at
any point leaves either the complete old file or the complete new one, never a torn mix.
This module sits below every layer (it imports nothing from tierlog) so the log engine,
the metadata manager and the server share one implementation.
"""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write(
    path: Path, data: bytes, *, make_parents: bool = False, durable: bool = True
) -> None:
    """Replace ``path`` with ``data`` (temp file -> fsync -> rename -> fsync dir).

    ``durable=False`` skips both fsyncs for callers that flush later themselves; the rename
    still guarantees readers never see a half-written file while the system is up.
    """
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
