"""Length-prefixed framing (protocol.framing): reassembly of any chunking, size limits."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlog.protocol.framing import FrameError, FrameSplitter, frame


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(1, 64), min_size=1, max_size=20),
)
def test_frame_splitter_reassembles_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    splitter = FrameSplitter(1000)
    got: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got += splitter.feed(stream[pos : pos + step])
        pos += step
        i += 1
    assert got == payloads
    assert splitter.buffered == 0


def test_frame_splitter_rejects_oversized_before_buffering_body() -> None:
    splitter = FrameSplitter(100)
    assert splitter.feed(struct.pack(">i", 100) + b"x" * 100) == [b"x" * 100]
    with pytest.raises(FrameError, match=re.escape("exceeds socket.request.max.bytes=100")):
        splitter.feed(struct.pack(">i", 101))
    with pytest.raises(FrameError, match="negative"):
        FrameSplitter(100).feed(struct.pack(">i", -1))
