"""Keep glibc's allocator from turning fragmentation into RSS growth.

In a soak (docs/reliability.md, scenario 6) the broker's Python heap stays flat (tracemalloc:
38-40 MB over ten minutes) while, without the remedies below, RSS keeps climbing: the growth
is in glibc malloc arenas.
Every thread that allocates (RLM copier/reader pools, obstore's runtime, the asyncio
to_thread pool) gets an arena of its own, up to 8 per core, and freed chunks inside an
arena are rarely returned to the kernel. Two standard remedies, both glibc-only and
no-ops elsewhere:

* cap the arenas (``mallopt(M_ARENA_MAX)``, what ``MALLOC_ARENA_MAX`` does), set before
  the pools start their threads; an explicit ``MALLOC_ARENA_MAX`` in the environment wins;
* ``malloc_trim(0)`` now and then, from a worker thread, which hands free pages inside
  every arena back to the kernel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
ARENAS = 2
TRIM_INTERVAL_S = 30.0


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library, loaded once, if it is glibc (it has ``mallopt`` and ``malloc_trim``)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib.mallopt  # noqa: B018 - present on glibc only
        lib.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return lib


def limit_arenas() -> bool:
    """Cap malloc arenas unless the operator chose a value; True if the cap was set."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    lib = _glibc()
    if lib is None:
        return False
    return bool(lib.mallopt(M_ARENA_MAX, ARENAS))


def trim() -> bool:
    """Return free heap pages to the kernel; True if any memory was released."""
    lib = _glibc()
    if lib is None:
        return False
    return bool(lib.malloc_trim(0))
