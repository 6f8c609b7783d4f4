"""Backfill: a topic's full history into Parquet, plus an hourly aggregation.

The cold history is read by the executors straight from the bucket (no load on the
broker); only the hot tail goes through the broker. Run against `make run`:

    .venv/bin/python examples/backfill.py --bootstrap-server 127.0.0.1:9092 \
        --topic events --output /tmp/events-backfill

Writes `<output>/records` (every record, partitioned by Kafka partition) and
`<output>/hourly` (records, bytes and distinct keys per hour and partition).
Credentials or private keys of the remote tier, if any: `--rsm-config KEY=VALUE`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tierlog.spark.jobs.session import job_session


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--master", help="Spark master (default local[2])")
    p.add_argument("--rsm-config", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    from pyspark.sql import functions as F

    spark, created = job_session("tierlog-backfill", args.master)
    try:
        reader = (
            spark.read.format("tierlog")
            .option("kafka.bootstrap.servers", args.bootstrap_server)
            .option("subscribe", args.topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("includeHeaders", "true")
        )
        for item in args.rsm_config:
            key, _, value = item.partition("=")
            reader = reader.option(f"tierlog.rsm.config.{key}", value)
        history = reader.load()
        history.write.mode("overwrite").partitionBy("partition").parquet(f"{args.output}/records")
        records = spark.read.parquet(f"{args.output}/records")  # aggregate the copy, not Kafka
        hourly = (
            records.groupBy(F.date_trunc("hour", "timestamp").alias("hour"), "partition")
            .agg(
                F.count("*").alias("records"),
                F.sum(F.length("value")).alias("value_bytes"),
                F.approx_count_distinct("key").alias("distinct_keys"),
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
            )
            .orderBy("hour", "partition")
        )
        hourly.write.mode("overwrite").parquet(f"{args.output}/hourly")
        total = records.count()
        print(f"backfilled {total} records of {args.topic} into {args.output}")
    finally:
        if created:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
