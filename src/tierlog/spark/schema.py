"""The row shape of the `tierlog` source: the same columns as Spark's built-in Kafka source.

Users switch between `format("kafka")` and `format("tierlog")` without touching their
queries, so names, order and types follow Spark exactly; headers appear only on request.
"""

from __future__ import annotations

import pyarrow as pa

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
_HEADERS_FIELD = pa.field("headers", pa.list_(HEADER_TYPE))

_BASE_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL = "headers array<struct<key: string, value: binary>>"


def arrow_schema(include_headers: bool) -> pa.Schema:
    return pa.schema([*_BASE_FIELDS, _HEADERS_FIELD] if include_headers else _BASE_FIELDS)


def spark_ddl(include_headers: bool) -> str:
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL
