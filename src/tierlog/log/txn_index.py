"""Transaction index (``.txnindex``): Kafka's 34-byte AbortedTxn entries.

One file per segment, created on its first entry (absent = empty): an entry per ABORT marker
appended to that segment, big-endian ``int16 version (0) | int64 producer id | int64 first
offset | int64 last offset (the marker's) | int64 last stable offset``. Entries are in marker
order, so ``last_offset`` strictly increases within a file.

A reader of ``[fetch_offset, upper_bound)`` needs every aborted transaction that overlaps it.
Entries are ordered by marker, and an entry whose LSO is at or past ``upper_bound`` proves
that every transaction starting below ``upper_bound`` had ended by its marker: the search
is complete there (Kafka's ``collectAbortedTxns``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
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


def aborted_txns_from_bytes(data: bytes, name: str = ".txnindex") -> list[AbortedTxn]:
    """The entries of an index's bytes (a remote copy read through its plugin), checked like
    ``load_sealed_aborted_txns``."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{name}: size {len(data)} is not a multiple of {ENTRY_SIZE}")
    out = []
    for _pos, version, txn in _entries(data):
        if version != _VERSION or txn.last_offset < txn.first_offset:
            raise CorruptIndexError(f"{name}: bad aborted txn entry {txn} (version {version})")
        out.append(txn)
    return out


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


def collect_aborted(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound: int, out: list[AbortedTxn]
) -> bool:
    """Add to ``out`` the entries overlapping ``[fetch_offset, upper_bound)``; True once an
    entry shows that no later index can hold one (its LSO reaches ``upper_bound``)."""
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
            out.append(txn)
        if txn.last_stable_offset >= upper_bound:
            return True
    return False


class TransactionIndex:
    """A local segment's ``.txnindex``, its entries kept in memory (aborts are rare and each
    entry is 34 bytes). Appends are written at once and made durable by ``flush``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = list(read_aborted_txns(self.path))
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"{self.path.name}: aborted txn ending at {txn.last_offset} is not after "
                f"{entries[-1].last_offset}"
            )
        append_aborted_txn(self.path, txn)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset``."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self._entries = kept
        if kept:
            self.path.write_bytes(b"".join(t.encode() for t in kept))
        else:
            self.path.unlink(missing_ok=True)

    def reset(self) -> None:
        self._entries = []
        self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
