"""Exceptions the log raises to the server, each carrying Kafka's error code."""

from __future__ import annotations

from tierlog.protocol.errors import ErrorCode, KafkaError


class LogError(KafkaError):
    """Base for log-engine failures."""


class LogAppendError(LogError):
    """The append was rejected and nothing was written."""


class OffsetOutOfRange(LogError):
    """A read or DeleteRecords offset outside what the local log holds.

    The offsets are attached so that the caller can decide between OFFSET_OUT_OF_RANGE and a
    remote read (offset below ``local_log_start_offset`` but at or above ``log_start_offset``).
    """

    def __init__(
        self, offset: int, log_start_offset: int, local_log_start_offset: int, log_end_offset: int
    ) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} outside [{local_log_start_offset}, {log_end_offset}] "
            f"(log start {log_start_offset})",
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.local_log_start_offset = local_log_start_offset
        self.log_end_offset = log_end_offset


class KafkaStorageError(LogError):
    """Disk I/O failed; the partition may be unusable."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)
