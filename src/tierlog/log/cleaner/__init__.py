"""Log compaction: Kafka's log cleaner over the on-disk log.

One concept per module: ``offset_map`` (memory-bounded key hash -> latest offset),
``cleanable`` (what may be cleaned now and how dirty it is), ``rebatch`` (decoding and
re-encoding the kept records of a batch), ``cleaned_segment`` (writing ``.cleaned`` files),
``swap`` (the crash-safe swap and its recovery at load), ``transactions`` (Kafka's rules for
aborted data and markers), ``throttler``, ``cleaner`` (one cleaning), ``log_cleaner`` (the
threads, checkpoints and health) and ``config``.

This package init imports nothing: ``partition_log`` uses ``swap`` at load, and the modules
that need ``partition_log`` must not be imported by it.
"""
