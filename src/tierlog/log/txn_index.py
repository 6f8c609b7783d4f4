"""Transaction index (``.txnindex``): Kafka's 34-byte AbortedTxn entries.

tierlog does not run transactions yet, so segments never write entries; the format is here so
that files produced by Kafka (or by a later tierlog) can be read, dumped and tiered.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from tierlog.log.index import CorruptIndexError

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


def _entries(data: bytes) -> Iterator[tuple[int, int, AbortedTxn]]:
    """(position, version, entry) of each whole entry in ``data``."""
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        yield pos, version, AbortedTxn(pid, first, last, lso)


def read_aborted_txns(path: Path) -> Iterator[AbortedTxn]:
    """The entries of a local segment's index (none if it has no file); a trailing partial
    entry is ignored, an unknown version raises ``ValueError``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for pos, version, txn in _entries(data):
        if version != _VERSION:
            raise ValueError(f"{path}: unknown AbortedTxn version {version} at {pos}")
        yield txn


def load_sealed_aborted_txns(path: Path) -> list[AbortedTxn]:
    """The entries of a sealed index copied from elsewhere (the remote tier's, cached on
    local disk), checked: raises ``CorruptIndexError`` unless the file holds whole entries,
    each with ``first_offset <= last_offset``."""
    data = path.read_bytes()
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{path.name}: size {len(data)} is not a multiple of {ENTRY_SIZE}")
    out = []
    for _pos, _version, txn in _entries(data):
        if txn.last_offset < txn.first_offset:
            raise CorruptIndexError(
                f"{path.name}: aborted txn {txn.first_offset}..{txn.last_offset} is inverted"
            )
        out.append(txn)
    return out


def append_aborted_txn(path: Path, txn: AbortedTxn) -> None:
    with path.open("ab") as f:
        f.write(txn.encode())
