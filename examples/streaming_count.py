"""Streaming: records per minute of a topic, to the console or to Parquet.

Started at `earliest` on a mostly tiered topic, the query first catches up from the
bucket, then follows the head through the broker. Run against `make run`:

    .venv/bin/python examples/streaming_count.py --bootstrap-server 127.0.0.1:9092 \
        --topic events                                   # console, runs until Ctrl-C
    .venv/bin/python examples/streaming_count.py ... --parquet /tmp/per-minute \
        --checkpoint /tmp/per-minute-ckpt --available-now  # process what exists, stop

Counts use event time (the record timestamp) with a 1-minute watermark, so each
minute is emitted once it can no longer change (append mode).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence

from tierlog.spark.jobs.session import job_session


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--parquet", help="output directory (default: print to the console)")
    p.add_argument("--checkpoint", help="checkpoint directory (default: a temp dir)")
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    p.add_argument("--available-now", action="store_true", help="process what exists, then stop")
    p.add_argument("--master", help="Spark master (default local[2])")
    args = p.parse_args(argv)

    from pyspark.sql import functions as F

    spark, created = job_session("tierlog-streaming-count", args.master)
    try:
        counts = (
            spark.readStream.format("tierlog")
            .option("kafka.bootstrap.servers", args.bootstrap_server)
            .option("subscribe", args.topic)
            .option("startingOffsets", args.starting_offsets)
            .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
            .load()
            .withWatermark("timestamp", "1 minute")
            .groupBy(F.window("timestamp", "1 minute").alias("minute"))
            .agg(F.count("*").alias("records"), F.sum(F.length("value")).alias("value_bytes"))
            .select(F.col("minute.start").alias("minute"), "records", "value_bytes")
        )
        checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="tierlog-count-ckpt-")
        writer = counts.writeStream.outputMode("append").option("checkpointLocation", checkpoint)
        if args.parquet:
            writer = writer.format("parquet").option("path", args.parquet)
        else:
            writer = writer.format("console").option("truncate", "false")
        if args.available_now:
            writer = writer.trigger(availableNow=True)
        query = writer.start()
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
    finally:
        if created:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
