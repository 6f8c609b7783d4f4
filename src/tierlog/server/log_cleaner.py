"""The broker's side of the log cleaner: its settings from the broker keys, its metrics.

The cleaner itself (``tierlog.log.cleaner``) is owned by the ``LogManager``; the broker
starts it after the logs are loaded and the manager stops it before the final flush.
The gauges are Kafka's ``LogCleaner``/``LogCleanerManager`` metrics, read when scraped,
plus ``tierlog_log_cleaner_dirty_ratio{topic,partition}``: the cleanable ratio of each
compacted log of this broker (its own replica), which ``tierlog topics describe
--metrics-url`` reads; Kafka has no request that carries it, only the cleaner's log line
and the ``max-dirty-percent`` gauge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tierlog.config.broker import BrokerConfig
from tierlog.log.cleaner.config import CleanerConfig
from tierlog.log.cleaner.log_cleaner import CleanerHealth

DIRTY_RATIO_METRIC = "tierlog_log_cleaner_dirty_ratio"


def cleaner_config_for(broker: BrokerConfig) -> CleanerConfig:
    return CleanerConfig(
        enable=bool(broker.get("log.cleaner.enable")),
        threads=int(broker.get("log.cleaner.threads")),
        backoff_ms=int(broker.get("log.cleaner.backoff.ms")),
        dedupe_buffer_size=int(broker.get("log.cleaner.dedupe.buffer.size")),
        io_buffer_load_factor=float(broker.get("log.cleaner.io.buffer.load.factor")),
        io_max_bytes_per_second=float(broker.get("log.cleaner.io.max.bytes.per.second")),
    )


class CleanerCollector(Collector):
    def __init__(self, source: Callable[[], CleanerHealth | None]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        health = self._source()
        if health is None:
            return
        values = (
            (
                "tierlog_log_cleaner_max_dirty_percent",
                "Dirty ratio of the dirtiest compacted log at the last check, in percent.",
                health.max_dirty_percent,
            ),
            (
                "tierlog_log_cleaner_recopy_percent",
                "Bytes written over bytes read by the last cleaning, in percent.",
                health.recopy_percent,
            ),
            (
                "tierlog_log_cleaner_time_since_last_run_ms",
                "Milliseconds since a cleaner thread last looked for a log to clean.",
                health.time_since_last_run_ms,
            ),
            (
                "tierlog_log_cleaner_uncleanable_partitions_count",
                "Partitions whose cleaning failed on bad data (still served, not cleaned).",
                health.uncleanable_partitions,
            ),
            (
                "tierlog_log_cleaner_max_compaction_delay_secs",
                "How far past max.compaction.lag.ms the most overdue dirty segment is.",
                health.max_compaction_delay_ms / 1000,
            ),
            (
                "tierlog_log_cleaner_max_clean_time_secs",
                "Duration of the last cleaning.",
                health.max_clean_time_s,
            ),
        )
        for name, doc, value in values:
            g = GaugeMetricFamily(name, doc)
            g.add_metric([], value)
            yield g
        ratios = GaugeMetricFamily(
            DIRTY_RATIO_METRIC,
            "Cleanable (dirty) bytes over all bytes below the first uncleanable offset, "
            "per compacted log.",
            labels=["topic", "partition"],
        )
        for tp, ratio in sorted(health.dirty_ratios.items()):
            ratios.add_metric([tp.topic, str(tp.partition)], ratio)
        yield ratios
