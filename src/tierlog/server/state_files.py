"""Small broker state files: written atomically, read tolerantly.

Topic definitions, the cluster id and producer-id blocks are tiny and change rarely, so they
are rewritten whole: write a temp file, fsync it, rename over the old one, fsync the
directory. A crash leaves either the old or the new version, never a torn one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: Path, obj: Any) -> None:
    write_atomically(path, json.dumps(obj, indent=1, sort_keys=True).encode())


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
