"""A compacted log only takes keyed records (Kafka's ``LogValidator`` rule).

The cleaner keeps the latest record *per key*, so a keyless record would be dropped by the
first cleaning that reaches it. Kafka refuses it at produce time instead, with
``INVALID_RECORD`` and this message; the check decodes the batch's records, which only a
compacted topic pays for.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierlog.log.cleaner.rebatch import scan_records
from tierlog.protocol.errors import ErrorCode
from tierlog.protocol.records import BatchHeader, Buffer, RecordsError


def require_keys(buf: Buffer, headers: Sequence[BatchHeader], partition: str) -> None:
    """Raise RecordsError(INVALID_RECORD) if a data batch in ``buf`` holds a keyless record."""
    data = buf if type(buf) is bytes else bytes(buf)
    for h in headers:
        if h.is_control:
            continue
        for span in scan_records(data, h, strict=True)[1]:
            if span[3] is None:
                raise RecordsError(
                    ErrorCode.INVALID_RECORD,
                    "Compacted topic cannot accept message without key in topic partition "
                    f"{partition}.",
                    h.position,
                )
