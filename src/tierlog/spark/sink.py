"""Writing DataFrames to topics, with the semantics of Spark's Kafka sink.

Columns: `value` (required, string or binary), `key` (string or binary), `topic` (string;
required unless the `topic` option is set, which then wins), `partition` (int; otherwise
the producer's partitioner) and `headers` (array<struct<key string, value binary>>). Like
Spark's sink it is at-least-once: a task produces every row and flushes, failing the task
on any delivery error, and a retried task may write rows again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tierlog.spark.options import BOOTSTRAP, OptionError

_STRING_OR_BINARY = ("string", "binary")


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None = None
    producer_config: Mapping[str, str] = field(default_factory=dict)


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    opts = {k.lower(): v for k, v in raw.items()}
    bootstrap = opts.get(BOOTSTRAP)
    if not bootstrap:
        raise OptionError(f"option '{BOOTSTRAP}' must be specified for the Kafka producer")
    config = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
    for refused in ("key.serializer", "value.serializer"):
        if refused in config:
            raise OptionError(f"Kafka option '{refused}' is not supported; bytes are written as-is")
    return SinkOptions(bootstrap, opts.get("topic"), config)


def check_sink_schema(fields: Mapping[str, str], opts: SinkOptions) -> None:
    """`fields` maps column name (lower case) to Spark simpleString type."""
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    for name in ("value", "key"):
        if name in fields and fields[name] not in _STRING_OR_BINARY:
            raise OptionError(f"{name} attribute type must be a string or binary")
    if opts.topic is None:
        if "topic" not in fields:
            raise OptionError(
                "topic option required when no 'topic' attribute is present. Use the "
                "topic option for setting a topic."
            )
        if fields["topic"] != "string":
            raise OptionError("Topic type must be a string")
    if "partition" in fields and fields["partition"] != "int":
        raise OptionError("partition attribute type must be an int")
    if "headers" in fields and fields["headers"] != "array<struct<key:string,value:binary>>":
        raise OptionError("headers attribute type must be array<struct<key:string,value:binary>>")


def _bytes(v: object) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    raise TypeError(f"cannot write {type(v).__name__} as bytes")


def produce_batches(opts: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row, flush, and raise on the first delivery error. Returns the count."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {"bootstrap.servers": opts.bootstrap, "linger.ms": "5", **opts.producer_config}
    )
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    count = 0
    for batch in batches:
        cols = {
            name.lower(): batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)
        }
        n = batch.num_rows
        values = cols["value"]
        keys = cols.get("key", [None] * n)
        topics = [opts.topic] * n if opts.topic is not None else cols["topic"]
        parts = cols.get("partition", [None] * n)
        headers = cols.get("headers", [None] * n)
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise OptionError(
                    "null topic present in the data. Use the topic option for "
                    "setting a default topic."
                )
            kwargs: dict[str, Any] = {
                "value": _bytes(values[i]),
                "key": _bytes(keys[i]),
                "on_delivery": on_delivery,
            }
            if parts[i] is not None:
                kwargs["partition"] = parts[i]
            if headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as exc:
                    raise RuntimeError(f"producing to {topic}: {exc}") from exc
            count += 1
        producer.poll(0)
        if errors:
            break
    remaining = producer.flush(60)
    if errors:
        raise RuntimeError(f"{len(errors)} records failed to be written: {errors[0]}")
    if remaining:
        raise RuntimeError(f"{remaining} records were not delivered within 60 s")
    return count
