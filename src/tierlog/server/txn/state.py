"""The transaction coordinator's state machine for one transactional id, all of it.

Rules of this file
------------------
1. Everything that decides a transactional id's state, producer id, epoch, partitions or
   error codes lives here. A coordinator driver only moves bytes, futures and timers.
2. No I/O, no asyncio, no clock reads. Time arrives as ``now_ms``; producer ids arrive from an
   ``allocate`` callable the driver owns (Kafka's ProducerIdManager).
3. Write-ahead. A request that changes metadata returns a ``Decision`` whose ``write`` is the
   metadata to append to ``__transaction_state`` (acks=-1) and whose ``current`` carries it as
   ``pending``. While anything is pending, every other request for the id gets
   CONCURRENT_TRANSACTIONS. The driver calls ``write_succeeded`` (the write becomes the
   metadata) or ``write_failed`` (the pending state is dropped) when the append answers.
4. Every applied change is checked against Kafka's table of valid previous states and its
   epoch rule (the epoch moves by 0 or +1, or to 0 with a new producer id); a violation is
   ``IllegalTransition``, a coordinator bug, never a client error.
5. Error codes and their precedence follow Apache Kafka's ``TransactionCoordinator`` for
   clients at transaction version 0/1 (EndTxn <= v4, AddPartitionsToTxn <= v3). Version
   mapping (PRODUCER_FENCED sent as INVALID_PRODUCER_EPOCH to old request versions) is the
   API layer's job.
6. The producer epoch of an id never goes backwards in memory, even when a write fails.

Theory of operation
-------------------
::

                 InitProducerId                AddPartitions / AddOffsets
    (new id) ---------------------> Empty -----------------------------> Ongoing <-+ more adds
                                     ^  ^                                 |  |  |  |
                   InitProducerId    |  |         EndTxn(commit)          |  |  +--+
         +---------------------------+  |   +-----------------------------+  |
         |                              |   v                                | EndTxn(abort), or
    CompleteCommit <--markers acked-- PrepareCommit                          | InitProducerId /
    CompleteAbort  <--markers acked-- PrepareAbort <--(PrepareEpochFence)----+ timeout (fence)
         |
         +--- transactional.id.expiration.ms idle (also from Empty) ---> Dead (tombstone)

* InitProducerId on Empty/Complete* bumps the epoch (fencing every older producer of the id).
  A producer that gives its (producer id, epoch) (KIP-360) is bumped only if that is the
  current pair, or recognised as a retry of the last bump (epoch = ``last_producer_epoch``);
  otherwise it is PRODUCER_FENCED. At epoch 32766 the epoch is exhausted: the id rotates to a
  new producer id at epoch 0, so that 32767 stays free for a coordinator fence.
* InitProducerId on Ongoing fences: the epoch is bumped in memory (pending
  PrepareEpochFence), PrepareAbort is written at the bumped epoch, and the caller answers
  CONCURRENT_TRANSACTIONS; the producer retries and is bumped once the abort completes. A
  timed-out Ongoing transaction is aborted the same way.
* EndTxn writes Prepare*, answers the client, then the driver sends one marker per partition
  (``markers``) and, once all are acknowledged, writes ``complete(...)``'s Complete*.
* KIP-890 part 1 (the partition leader asking the coordinator, with AddPartitionsToTxn v4+
  VerifyOnly, whether a partition is in the transaction before the producer's first write to
  it) is ``verify_partitions``.
* Transaction version 2 (KIP-890 part 2) is not decided here: the broker must not advertise
  ``transaction.version`` >= 2 until it is. Under TV2 EndTxn v5 bumps the epoch on every
  commit/abort (Prepare* written at E+1 with ``last_producer_epoch`` E; at an exhausted epoch
  it carries a fresh ``next_producer_id`` that Complete* switches to at epoch 0), accepts a
  retry at E-1, allows an empty PrepareAbort from Empty/Complete*, and partitions are added
  implicitly by Produce v12 and TxnOffsetCommit v5 (AddPartitionsToTxn v4+ without
  VerifyOnly).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum

from tierlog.protocol.errors import ErrorCode
from tierlog.server.group.model import TopicPartition
from tierlog.server.group.schema import OFFSETS_TOPIC, partition_for
from tierlog.server.txn.config import TxnCoordinatorConfig
from tierlog.server.txn.schema import TxnLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767
#: At this epoch a bump rotates to a new producer id; MAX_PRODUCER_EPOCH is kept for a fence.
EXHAUSTED_EPOCH = MAX_PRODUCER_EPOCH - 1


class TxnState(Enum):
    """Kafka's transaction states: value = the id written in TransactionLogValue, and ``label``
    the name DescribeTransactions/ListTransactions show."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def expirable(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_LABELS = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_COMPLETE = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
_PREPARE = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})

#: Kafka's valid previous states (transaction version 0/1; TV2 adds Empty/Complete* to
#: PrepareAbort).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY}) | _COMPLETE,
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY}) | _COMPLETE,
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY}) | _COMPLETE,
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


class IllegalTransition(RuntimeError):
    """The coordinator tried a transition Kafka's rules forbid: a bug, not a client error."""


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= EXHAUSTED_EPOCH


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnMetadata:
    """One transactional id. ``last_producer_epoch`` and the two ``pending``/fence fields live
    in memory only; ``fenced_from`` is the state a pending fence abort started from."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    prev_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0
    pending: TxnState | None = None
    pending_fence: bool = False
    has_failed_epoch_fence: bool = False

    def to_log_value(self) -> TxnLogValue:
        topics: dict[str, list[int]] = {}
        for tp in self.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            state=self.state.value,
            partitions=tuple((t, tuple(sorted(ps))) for t, ps in sorted(topics.items())),
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            prev_producer_id=self.prev_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TxnLogValue) -> TxnMetadata:
        """Metadata as a loader rebuilds it: ``last_producer_epoch`` is not persisted."""
        state = TxnState(value.state)
        if state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            raise IllegalTransition(f"{state.label} is never written to the log")
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.timeout_ms,
            state=state,
            partitions=frozenset(TopicPartition(t, p) for t, ps in value.partitions for p in ps),
            start_ms=value.start_ms,
            last_update_ms=value.last_update_ms,
            prev_producer_id=value.prev_producer_id,
            next_producer_id=value.next_producer_id,
            client_transaction_version=value.client_transaction_version,
        )


@dataclass(frozen=True, slots=True)
class Decision:
    """What a request decided.

    ``current`` is the id's metadata from now on (``None``: there is none; with ``write`` set,
    its ``pending`` is the written state). ``write`` is the metadata to append, or ``None``.
    ``error`` is the answer once ``write`` (if any) succeeded; when the write fails the answer
    is the write's error, mapped as Kafka's ``appendTransactionToLog`` does. ``producer_id``
    and ``producer_epoch`` are what InitProducerId answers. ``markers`` says that after the
    write the transaction's markers must be sent to ``write.partitions``.
    """

    error: ErrorCode
    current: TxnMetadata | None
    write: TxnMetadata | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    markers: bool = False


def _refuse(error: ErrorCode, meta: TxnMetadata | None) -> Decision:
    return Decision(error, meta)


def _propose(current: TxnMetadata, target: TxnMetadata, *, fence: bool = False) -> TxnMetadata:
    """``current`` with ``target.state`` pending, after checking the transition is legal."""
    check_transition(current, target)
    return replace(current, pending=target.state, pending_fence=fence)


def check_transition(old: TxnMetadata, new: TxnMetadata) -> None:
    """Kafka's assertions on every applied transition (rule 4)."""
    if old.state not in VALID_PREVIOUS[new.state]:
        raise IllegalTransition(f"{old.state.label} -> {new.state.label}")
    same_pid = new.producer_id == old.producer_id
    epoch_ok = (
        same_pid and new.producer_epoch in (old.producer_epoch, old.producer_epoch + 1)
    ) or (new.producer_epoch == 0 and (not same_pid or old.producer_epoch == NO_PRODUCER_EPOCH))
    if not epoch_ok:
        raise IllegalTransition(
            f"epoch {old.producer_id}/{old.producer_epoch}"
            f" -> {new.producer_id}/{new.producer_epoch}"
        )
    if new.state is TxnState.EMPTY and (new.partitions or new.start_ms != -1):
        raise IllegalTransition("Empty with partitions or a start time")
    ongoing = new.state is TxnState.ONGOING and old.state is TxnState.ONGOING
    if ongoing and not old.partitions <= new.partitions:
        raise IllegalTransition("Ongoing may only add partitions")
    if new.state in _PREPARE and new.partitions != old.partitions:
        raise IllegalTransition("Prepare must keep the transaction's partitions")


# --- write completion -------------------------------------------------------------------------


def write_succeeded(current: TxnMetadata, written: TxnMetadata) -> TxnMetadata:
    """The append of ``written`` succeeded: it becomes the metadata."""
    if current.pending is not written.state:
        raise IllegalTransition(
            f"completed {written.state.label} but pending is "
            f"{current.pending.label if current.pending else None}"
        )
    base = (
        replace(current, state=TxnState.PREPARE_EPOCH_FENCE) if current.pending_fence else current
    )
    check_transition(base, written)
    return replace(written, pending=None, pending_fence=False, has_failed_epoch_fence=False)


def write_failed(current: TxnMetadata) -> TxnMetadata:
    """The append failed: drop the pending state. A failed fence keeps its bumped epoch and
    remembers it, so that the next fence does not bump again (rule 6)."""
    return replace(
        current,
        pending=None,
        pending_fence=False,
        has_failed_epoch_fence=current.has_failed_epoch_fence or current.pending_fence,
    )


# --- InitProducerId ---------------------------------------------------------------------------


def validate_timeout(timeout_ms: int, config: TxnCoordinatorConfig) -> ErrorCode:
    if timeout_ms <= 0 or timeout_ms > config.max_timeout_ms:
        return ErrorCode.INVALID_TRANSACTION_TIMEOUT
    return ErrorCode.NONE


def init_producer_id(
    meta: TxnMetadata | None,
    transactional_id: str,
    timeout_ms: int,
    now_ms: int,
    allocate: Callable[[], int],
    config: TxnCoordinatorConfig,
    *,
    expected_producer_id: int = NO_PRODUCER_ID,
    expected_epoch: int = NO_PRODUCER_EPOCH,
) -> Decision:
    """InitProducerId with a transactional id (a null id is answered without the coordinator).
    ``meta`` is the cached metadata, ``None`` for an unknown or expired id."""
    if not transactional_id:
        return _refuse(ErrorCode.INVALID_REQUEST, meta)
    if validate_timeout(timeout_ms, config) is not ErrorCode.NONE:
        return _refuse(ErrorCode.INVALID_TRANSACTION_TIMEOUT, meta)
    if meta is None or meta.state is TxnState.DEAD:
        if meta is not None and meta.pending is not None:
            return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
        meta = TxnMetadata(
            transactional_id=transactional_id,
            producer_id=allocate(),
            producer_epoch=NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            state=TxnState.EMPTY,
            last_update_ms=now_ms,
        )
    if meta.pending is not None:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    expected_given = expected_producer_id != NO_PRODUCER_ID
    if expected_given and not (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or expected_producer_id == meta.producer_id
        or (expected_producer_id == meta.prev_producer_id and epoch_exhausted(expected_epoch))
    ):
        return _refuse(ErrorCode.PRODUCER_FENCED, meta)
    if meta.state in _PREPARE:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    if meta.state is TxnState.ONGOING:
        return _fence_and_abort(meta, now_ms, ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.state not in (TxnState.EMPTY, *_COMPLETE):
        raise IllegalTransition(f"InitProducerId in {meta.state.label}")

    target: TxnMetadata
    if epoch_exhausted(meta.producer_epoch) and (
        not expected_given or expected_epoch == meta.producer_epoch
    ):
        target = replace(
            meta,
            producer_id=allocate(),
            prev_producer_id=meta.producer_id,
            producer_epoch=0,
            last_producer_epoch=meta.producer_epoch if expected_given else NO_PRODUCER_EPOCH,
        )
    elif not expected_given:
        target = replace(
            meta, producer_epoch=meta.producer_epoch + 1, last_producer_epoch=NO_PRODUCER_EPOCH
        )
    elif meta.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
        target = replace(
            meta, producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch
        )
    elif expected_epoch == meta.last_producer_epoch and expected_epoch != NO_PRODUCER_EPOCH:
        target = meta
    else:
        return _refuse(ErrorCode.PRODUCER_FENCED, meta)
    target = replace(
        target,
        state=TxnState.EMPTY,
        partitions=frozenset(),
        start_ms=-1,
        timeout_ms=timeout_ms,
        last_update_ms=now_ms,
        pending=None,
        has_failed_epoch_fence=False,
    )
    return Decision(
        ErrorCode.NONE,
        _propose(meta, target),
        target,
        target.producer_id,
        target.producer_epoch,
    )


def _fence_and_abort(meta: TxnMetadata, now_ms: int, error: ErrorCode) -> Decision:
    """Bump the epoch in memory (PrepareEpochFence) and write PrepareAbort at the bumped epoch.
    After a failed fence the epoch is already bumped and is not bumped again."""
    epoch = meta.producer_epoch if meta.has_failed_epoch_fence else meta.producer_epoch + 1
    if epoch > MAX_PRODUCER_EPOCH:
        raise IllegalTransition("cannot fence a producer at the maximum epoch")
    fenced = replace(meta, producer_epoch=epoch, state=TxnState.PREPARE_EPOCH_FENCE)
    target = replace(
        meta,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        state=TxnState.PREPARE_ABORT,
        last_update_ms=now_ms,
    )
    check_transition(fenced, target)
    current = replace(
        meta, producer_epoch=epoch, pending=TxnState.PREPARE_ABORT, pending_fence=True
    )
    return Decision(error, current, target, markers=True)


# --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------


def _check_producer(
    meta: TxnMetadata | None, transactional_id: str, producer_id: int, producer_epoch: int
) -> ErrorCode:
    if not transactional_id:
        return ErrorCode.INVALID_REQUEST
    if meta is None or meta.state is TxnState.DEAD or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn v0-v3: one error for every requested partition."""
    error = _check_producer(meta, transactional_id, producer_id, producer_epoch)
    if error is not ErrorCode.NONE or meta is None:
        return _refuse(error, meta)
    if meta.pending is not None or meta.state in _PREPARE:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    wanted = frozenset(partitions)
    if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
        return Decision(ErrorCode.NONE, meta)
    if meta.state is not TxnState.ONGOING and meta.state not in (TxnState.EMPTY, *_COMPLETE):
        raise IllegalTransition(f"AddPartitionsToTxn in {meta.state.label}")
    fresh = meta.state is not TxnState.ONGOING
    target = replace(
        meta,
        state=TxnState.ONGOING,
        partitions=wanted if fresh else meta.partitions | wanted,
        start_ms=now_ms if fresh else meta.start_ms,
        last_update_ms=now_ms,
    )
    return Decision(ErrorCode.NONE, _propose(meta, target), target)


def offsets_partition(group_id: str, config: TxnCoordinatorConfig) -> TopicPartition:
    """The ``__consumer_offsets`` partition AddOffsetsToTxn adds for ``group_id``."""
    return TopicPartition(
        OFFSETS_TOPIC, partition_for(group_id, config.offsets_topic_num_partitions)
    )


def add_offsets(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
    now_ms: int,
    config: TxnCoordinatorConfig,
) -> Decision:
    """AddOffsetsToTxn: AddPartitionsToTxn of the group's offsets partition."""
    partition = offsets_partition(group_id, config)
    return add_partitions(meta, transactional_id, producer_id, producer_epoch, [partition], now_ms)


def verify_partitions(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> ErrorCode | dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4+ with VerifyOnly (KIP-890 part 1): a whole-transaction error, or per
    partition NONE if it is in the transaction and TRANSACTION_ABORTABLE if not. Pending state
    is ignored: the leader's append re-checks."""
    error = _check_producer(meta, transactional_id, producer_id, producer_epoch)
    if error is not ErrorCode.NONE or meta is None:
        return error
    if meta.state in _PREPARE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    return {
        tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE
        for tp in partitions
    }


# --- EndTxn -----------------------------------------------------------------------------------


def end_txn(
    meta: TxnMetadata | None,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    *,
    from_client: bool = True,
) -> Decision:
    """EndTxn v0-v4 (transaction version 0/1); ``from_client=False`` is the coordinator's own
    abort of a fenced or timed-out transaction."""
    if not transactional_id:
        return _refuse(ErrorCode.INVALID_REQUEST, meta)
    if meta is None or meta.state is TxnState.DEAD or meta.producer_id != producer_id:
        return _refuse(ErrorCode.INVALID_PRODUCER_ID_MAPPING, meta)
    stale = (
        producer_epoch < meta.producer_epoch
        if not from_client
        else producer_epoch != meta.producer_epoch
    )
    if stale:
        return _refuse(ErrorCode.PRODUCER_FENCED, meta)
    if meta.pending is not None and meta.pending is not TxnState.PREPARE_EPOCH_FENCE:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    state = meta.state
    if state is TxnState.ONGOING:
        target = replace(
            meta,
            state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
            last_update_ms=now_ms,
        )
        return Decision(ErrorCode.NONE, _propose(meta, target), target, markers=True)
    if state is TxnState.PREPARE_COMMIT:
        return _refuse(
            ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE, meta
        )
    if state is TxnState.PREPARE_ABORT:
        return _refuse(
            ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS, meta
        )
    if state is TxnState.COMPLETE_COMMIT:
        return _refuse(ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE, meta)
    if state is TxnState.COMPLETE_ABORT:
        return _refuse(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE, meta)
    return _refuse(ErrorCode.INVALID_TXN_STATE, meta)


def marker_written(meta: TxnMetadata, partition: TopicPartition) -> TxnMetadata:
    """A partition leader acknowledged the marker (or the partition is gone): it leaves the set
    still awaiting markers, which DescribeTransactions shows during Prepare*."""
    if meta.state not in _PREPARE:
        raise IllegalTransition(f"marker acknowledged in {meta.state.label}")
    return replace(meta, partitions=meta.partitions - {partition})


def complete(meta: TxnMetadata, now_ms: int) -> Decision:
    """Every marker is written: write Complete*, keeping the start time and clearing partitions."""
    if meta.pending is not None:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, meta)
    if meta.state not in _PREPARE:
        raise IllegalTransition(f"complete in {meta.state.label}")
    commit = meta.state is TxnState.PREPARE_COMMIT
    target = replace(
        meta,
        state=TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
        partitions=frozenset(),
        last_update_ms=now_ms,
    )
    return Decision(ErrorCode.NONE, replace(meta, pending=target.state), target)


# --- timeouts and expiration ------------------------------------------------------------------


def timed_out(meta: TxnMetadata, now_ms: int) -> bool:
    """An Ongoing transaction with nothing pending that outlived its timeout, counted from its
    first partition add (not from the client's beginTransaction)."""
    return (
        meta.state is TxnState.ONGOING
        and meta.pending is None
        and meta.start_ms + meta.timeout_ms < now_ms
    )


def abort_timed_out(meta: TxnMetadata, now_ms: int) -> Decision | None:
    """The coordinator's abort of a timed-out transaction: fence the producer's epoch and write
    PrepareAbort; ``None`` if the transaction has not timed out."""
    if not timed_out(meta, now_ms):
        return None
    return _fence_and_abort(meta, now_ms, ErrorCode.NONE)


def expired(meta: TxnMetadata, now_ms: int, config: TxnCoordinatorConfig) -> bool:
    return (
        meta.state.expirable
        and meta.pending is None
        and meta.last_update_ms <= now_ms - config.id_expiration_ms
    )


def expire(meta: TxnMetadata, now_ms: int, config: TxnCoordinatorConfig) -> Decision | None:
    """``transactional.id.expiration.ms`` idle: pending Dead; the write is a tombstone (write
    ``None`` as the value), after which the driver drops the id from its cache."""
    if not expired(meta, now_ms, config):
        return None
    target = replace(meta, state=TxnState.DEAD, last_update_ms=now_ms)
    check_transition(meta, target)
    return Decision(ErrorCode.NONE, replace(meta, pending=TxnState.DEAD), target)
