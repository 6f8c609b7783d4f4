"""A compacted log only takes keyed records (Kafka's ``LogValidator`` rule).

The cleaner keeps the latest record *per key*, so a keyless record would be dropped by the
first cleaning that reaches it. Kafka refuses it at produce time instead, with
``INVALID_RECORD`` and this message; the check decodes the batch's records, which only a
compacted topic pays for.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierlog.log.cleaner.rebatch import decode_records
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import BatchHeader, Buffer, RecordsError


def require_keys(buf: Buffer, headers: Sequence[BatchHeader], partition: str) -> None:
    """Raise RecordsError(INVALID_RECORD) if a data batch in ``buf`` holds a keyless record."""
    for h in headers:
        if h.is_control:
            continue
        for record in decode_records(buf, h):
            if record.key is None:
                raise RecordsError(
                    ErrorCode.INVALID_RECORD,
                    "Compacted topic cannot accept message without key in topic partition "
                    f"{partition}.",
                    h.position,
                )
