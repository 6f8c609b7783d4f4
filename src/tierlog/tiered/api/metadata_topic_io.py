"""The narrow view of the metadata log (``__remote_log_metadata``) a metadata plugin needs.

A metadata manager that keeps its events in a log never touches the log engine directly:
the broker supplies an adapter over its own ``LogManager`` (see docs/architecture.md) through
``SupportsMetadataTopic``; tests and benchmarks use ``InMemoryMetadataTopicIO``.
Implementations must be thread-safe: the manager appends from its publisher thread and reads
from its consumer thread concurrently.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping


class MetadataTopicIO(abc.ABC):
    """One topic of a few partitions, as (offset, value) records; the topic's name and
    configs are the metadata manager's business, not this interface's."""

    @abc.abstractmethod
    def ensure_topic(self, num_partitions: int, configs: Mapping[str, str]) -> int:
        """Create the topic with ``num_partitions`` partitions and ``configs`` if it does not
        exist; return its actual partition count (which may differ if it already existed).
        Raise any exception for a transient failure: the manager retries until
        ``remote.log.metadata.initialization.retry.max.timeout.ms``."""

    @abc.abstractmethod
    def append(self, partition: int, key: bytes | None, value: bytes) -> int:
        """Append one record and return its offset. Durable on return (flushed to disk),
        because the caller acts on the event (e.g. deletes remote data) right after."""

    @abc.abstractmethod
    def end_offset(self, partition: int) -> int:
        """The offset the next appended record will get."""

    @abc.abstractmethod
    def read(self, partition: int, from_offset: int) -> list[tuple[int, bytes]]:
        """Some records with offset >= ``from_offset``, in offset order, as (offset, value).

        Returns at least one record when ``from_offset < end_offset``, an empty list at the
        end. May return a bounded batch; the caller keeps reading from the next offset.
        Offsets need not be contiguous.
        """
