"""Transaction index (``.txnindex``): Kafka's 34-byte AbortedTxn entries.

tierlog does not run transactions yet, so segments never write entries; the format is here so
that files produced by Kafka (or by a later tierlog) can be read, dumped and tiered.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            _VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def read_aborted_txns(path: Path) -> Iterator[AbortedTxn]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    usable = len(data) - len(data) % ENTRY_SIZE
    for pos in range(0, usable, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != _VERSION:
            raise ValueError(f"{path}: unknown AbortedTxn version {version} at {pos}")
        yield AbortedTxn(pid, first, last, lso)


def append_aborted_txn(path: Path, txn: AbortedTxn) -> None:
    with path.open("ab") as f:
        f.write(txn.encode())
