"""PySpark integration: the `tierlog` data source and sink, and the audit / usage jobs.

    import tierlog.spark
    tierlog.spark.register(spark)
    df = spark.read.format("tierlog").option("kafka.bootstrap.servers", "127.0.0.1:9092") \
        .option("subscribe", "events").load()

With spark-submit, ship the package (or install it on every node) and call `register`
at the start of the application; the format name is then usable from SQL too.
pyspark is imported only by `register`, so the decoder and planner work without it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the `tierlog` format on a SparkSession."""
    from tierlog.spark.source import TierlogDataSource

    spark.dataSource.register(TierlogDataSource)
