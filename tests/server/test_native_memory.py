"""The glibc allocator settings the broker applies at start (see server/native_memory.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tierlog.server import native_memory


def test_arenas_are_capped_on_glibc_unless_the_operator_chose() -> None:
    assert native_memory.limit_arenas() is True  # this machine runs glibc (Debian)


def test_an_explicit_malloc_arena_max_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert native_memory.limit_arenas() is False


def test_trim_hands_freed_heap_back_to_the_kernel() -> None:
    """Free many small blocks scattered by a few survivors: RSS stays up until the trim."""
    script = textwrap.dedent(
        """
        from tierlog.server import native_memory

        def rss_kib():
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])

        blocks = [bytearray(4000) for _ in range(50_000)]  # malloc, not pymalloc
        keep = blocks[::1000]  # survivors pin the top of the heap
        del blocks
        before = rss_kib()
        released = native_memory.trim()
        after = rss_kib()
        print(released, before, after)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    released, before, after = out[0] == "True", int(out[1]), int(out[2])
    assert released
    assert after < before - 50_000, (before, after)  # at least ~50 MiB given back
