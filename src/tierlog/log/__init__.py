"""Kafka on-disk log engine: the contract in docs/architecture.md "Log engine contract".

Additions to the contract (compatible, all optional):

* ``LogManager.load(topic_configs=None)`` takes per-topic configs known before load.
* ``LogManager(..., remote_storage_system_enable=False, clock=...)``: the broker switch used
  to compute each log's ``remote_enabled`` (which callers may still set directly).
* ``AppendResult.duplicate`` marks an idempotent-producer retry answered with its original
  offsets (Kafka answers NONE with those offsets); also ``records_count`` and ``size``.
* ``FetchData.first_batch_offset`` and ``FetchData.to_bytes()``.
* ``OffsetOutOfRange`` carries ``log_start_offset``/``local_log_start_offset``/
  ``log_end_offset`` so the caller can tell a remote read from a real out-of-range.
* ``PartitionLog.offset_for_max_timestamp()`` for ListOffsets -3.
* ``append_as_leader(..., defer_flush=True)`` leaves the fsync ``flush.messages`` asks for to
  the caller (``AppendResult.flush_offset``, ``PartitionLog.flush_to``, run on
  ``LogManager.flush_to``'s pool).
* ``PartitionLog.is_remote_offset(offset)``: only remote storage holds ``offset``.
* ``SegmentInfo.txn_index_path`` may not exist (no abort marker in that segment).
* Transactions: ``PartitionLog.append_txn_marker`` (WriteTxnMarkers), ``last_stable_offset``,
  ``read(..., upper_bound="lso")``, ``aborted_txns_in`` / ``collect_aborted_txns`` (the
  ``.txnindex`` entries a read_committed fetch returns), ``has_ongoing_txn`` (KIP-890).
* Log compaction (``tierlog.log.cleaner``): ``LogManager.start_cleaner(CleanerConfig)``
  starts the cleaner threads the manager owns (``shutdown`` stops them first),
  ``LogManager.logs_by_dir()``; ``PartitionLog.replace_segments`` swaps a cleaned segment in
  and ``PartitionLog.active_producer_last_offsets`` tells the cleaner which batches keep a
  producer's sequence. A compacted log has offset gaps.
"""

from tierlog.log.config import LogConfig
from tierlog.log.dump import dump_file
from tierlog.log.errors import KafkaStorageError, LogAppendError, LogError, OffsetOutOfRange
from tierlog.log.leader_epoch import EpochEntry, LeaderEpochCache
from tierlog.log.manager import LogManager
from tierlog.log.names import TopicPartition
from tierlog.log.partition_log import AppendResult, FetchData, PartitionLog, SegmentInfo

__all__ = [
    "AppendResult",
    "EpochEntry",
    "FetchData",
    "KafkaStorageError",
    "LeaderEpochCache",
    "LogAppendError",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRange",
    "PartitionLog",
    "SegmentInfo",
    "TopicPartition",
    "dump_file",
]
