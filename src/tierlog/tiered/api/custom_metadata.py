"""Opaque bytes a storage plugin attaches to a segment it copied."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CustomMetadata:
    """Plugin-defined bytes (e.g. an object key and size) stored with the segment metadata.

    The broker never interprets them; it only enforces
    ``remote.log.metadata.custom.metadata.max.bytes`` because they are replicated in every
    metadata record and kept in memory on every broker.
    """

    value: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.value, bytes):
            object.__setattr__(self, "value", bytes(self.value))

    def __len__(self) -> int:
        return len(self.value)

    def __repr__(self) -> str:
        return f"CustomMetadata({len(self.value)} bytes)"
