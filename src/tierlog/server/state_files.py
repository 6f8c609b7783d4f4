"""Small broker state files: written atomically, read tolerantly.

Topic definitions, the cluster id and producer-id blocks are tiny and change rarely, so they
are rewritten whole: write a temp file, fsync it, rename over the old one, fsync the
directory. A crash leaves either the old or the new version, never a torn one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tierlog.fsutil import atomic_write


def write_atomically(path: Path, data: bytes) -> None:
    atomic_write(path, data, make_parents=True)


def write_json(path: Path, obj: Any) -> None:
    write_atomically(path, json.dumps(obj, indent=1, sort_keys=True).encode())


class StateFileError(RuntimeError):
    """A broker state file exists but cannot be parsed.

    These files are written atomically, so damage means outside interference (a disk
    fault, a hand edit). Guessing would risk forgetting topics or reusing producer ids, so
    the broker refuses to start and the message names the file to restore.
    """


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StateFileError(f"{path} is damaged ({e}); restore it or remove it") from e
