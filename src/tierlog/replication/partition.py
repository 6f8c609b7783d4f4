"""One partition's replication state, owned in one place (Kafka's ``Partition`` and
``Replica``; spec/kafka-replication.md §3, §5).

``Partition`` holds what this broker knows of the partition as leader or follower: the
leader, leader epoch, partition epoch (the state znode's version), assignment, committed ISR,
the ISR change in flight, and as leader each follower's fetch state. Every rule that moves
them is a method here; the ``ReplicaManager`` calls them on the event loop and performs the
I/O they ask for (the ISR write, waking waiters). Nothing here blocks.

What holds:

* **HW = min LEO over the maximal ISR** (committed ISR plus an expansion in flight, R-7,
  checklist 1/14) and over the caught-up followers outside it (Kafka's
  ``maybeIncrementLeaderHW``), never decreasing while leader (R-2), and frozen while the
  committed ISR is below the effective ``min.insync.replicas`` = min(config, replica count)
  (KAFKA-15583).
  A follower that has not fetched in the current epoch has an unknown LEO and holds the HW
  back (T-4).
* **Caught-up time** follows Kafka's ``Replica.updateFetchState`` (L-12): a fetch at the
  leader's LEO sets it to now; a fetch reaching the LEO seen at the previous fetch sets it to
  the previous fetch's time.
* **Shrink** proposes removing ISR members not caught up within ``replica.lag.time.max.ms``
  (L-13, L-14); **expand** adds a follower whose LEO is at least the HW and the start of the
  current epoch (L-15). One change is in flight at a time (L-17); a removal counts only once
  written.
* **Leadership** is applied by leader epoch (T-2): a higher epoch is a transition, an equal
  epoch with a higher partition epoch only refreshes the ISR. A new leader epoch is cached in
  the epoch cache at the LEO before any append (KAFKA-7415, T-3).
* **A new epoch is above every epoch the log holds** (R-3, R-4). A log can carry epochs the
  cluster never handed out (a partition directory written by Apache Kafka placed in
  ``log.dirs``, or one from an earlier cluster): caching a smaller epoch would erase them and
  stamp batches below their history. Such a leader refuses produce (NOT_LEADER_OR_FOLLOWER,
  retriable) and asks for its own state to be rewritten with the epoch just above its
  checkpoint's (``epoch_bump``), conditional on the partition epoch like an ISR change; it
  leads once that epoch comes back from ZooKeeper.
* **The assignment** (replicas, reassignment included) comes from the topic znode and may
  change without a new leader epoch (tierlog's controller does not bump it to start a
  reassignment): the leader starts tracking added followers and forgets removed ones.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Container
from dataclasses import dataclass

from tierlog.cluster.znodes import NO_LEADER, PartitionState
from tierlog.log import PartitionLog
from tierlog.protocol.errors import ErrorCode

UNKNOWN_OFFSET = -1


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's ``Replica``)."""

    leo: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0

    def update(self, fetch_offset: int, log_start: int, leader_leo: int, now_ms: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.log_start_offset = log_start
        self.last_fetch_leader_leo = max(leader_leo, self.last_fetch_leader_leo)
        self.last_fetch_ms = now_ms

    def caught_up(self, leader_leo: int, now_ms: int, lag_ms: int) -> bool:
        return self.leo == leader_leo or now_ms - self.last_caught_up_ms <= lag_ms


class Partition:
    def __init__(self, topic: str, index: int, broker_id: int, log: PartitionLog) -> None:
        self.topic = topic
        self.index = index
        self.broker_id = broker_id
        self.log = log
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.leader_recovery_state = 0
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.pending_isr: tuple[int, ...] | None = None
        """An ISR written to ZooKeeper and not yet confirmed (one at a time)."""
        self.followers: dict[int, FollowerState] = {}
        self.epoch_start_offset = UNKNOWN_OFFSET
        self.min_insync_replicas = 1
        self.epoch_bump: int | None = None
        """The leader epoch this leader needs before it may append (above its checkpoint)."""

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def maximal_isr(self) -> set[int]:
        isr = set(self.isr)
        if self.pending_isr is not None:
            isr |= set(self.pending_isr)
        return isr

    @property
    def effective_min_isr(self) -> int:
        return max(1, min(self.min_insync_replicas, len(self.replicas) or 1))

    # ---- transitions (T-2..T-7) ---------------------------------------------------------
    def apply_state(
        self,
        state: PartitionState,
        partition_epoch: int,
        replicas: tuple[int, ...],
        now_ms: int,
    ) -> bool:
        """Take a state read from ZooKeeper; True if it is a new leader epoch (a transition:
        the caller restarts fetching or leading). Older states are ignored."""
        if state.leader_epoch < self.leader_epoch or (
            state.leader_epoch == self.leader_epoch and partition_epoch <= self.partition_epoch
        ):
            if state.leader_epoch == self.leader_epoch and replicas != self.replicas:
                self._set_replicas(replicas)
            return False
        new_epoch = state.leader_epoch > self.leader_epoch
        was_leader = self.is_leader
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = partition_epoch
        self.controller_epoch = state.controller_epoch
        self.leader_recovery_state = state.leader_recovery_state
        self.isr = state.isr
        self.pending_isr = None
        if not self.is_leader:
            self.replicas = replicas
            self.followers.clear()
            self.epoch_start_offset = UNKNOWN_OFFSET
            self.epoch_bump = None
            return new_epoch
        if new_epoch:
            self.replicas = replicas
            self._become_leader(now_ms, was_leader)
        else:
            self._set_replicas(replicas)
        return new_epoch

    def _set_replicas(self, replicas: tuple[int, ...]) -> None:
        self.replicas = replicas
        if not self.is_leader:
            return
        for r in replicas:
            if r != self.broker_id and r not in self.followers:
                self.followers[r] = FollowerState()
        for r in [r for r in self.followers if r not in replicas]:
            del self.followers[r]

    def _become_leader(self, now_ms: int, re_elected: bool) -> None:
        leo = self.log.log_end_offset
        checkpointed = self.log.leader_epoch_cache.latest_epoch()
        if checkpointed is not None and checkpointed >= self.leader_epoch:
            self.epoch_bump = checkpointed + 1
        else:
            self.epoch_bump = None
            self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
        self.epoch_start_offset = leo
        old = self.followers
        self.followers = {}
        for r in self.replicas:
            if r == self.broker_id:
                continue
            prev = old.get(r) if re_elected else None
            fs = FollowerState()
            if prev is not None:
                fs.leo, fs.log_start_offset = prev.leo, prev.log_start_offset
                fs.last_fetch_leader_leo = leo
                fs.last_fetch_ms = now_ms if r in self.isr else 0
            fs.last_caught_up_ms = now_ms if r in self.isr else 0
            self.followers[r] = fs

    # ---- leader: fencing ----------------------------------------------------------------
    def check_epoch(self, current_leader_epoch: int) -> ErrorCode | None:
        """KIP-320: FENCED_LEADER_EPOCH for an older epoch, UNKNOWN_LEADER_EPOCH for a newer
        one, -1 unchecked."""
        if current_leader_epoch in (-1, self.leader_epoch):
            return None
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.FENCED_LEADER_EPOCH

    def check_leader(self, current_leader_epoch: int = -1) -> ErrorCode | None:
        epoch_error = self.check_epoch(current_leader_epoch)
        if epoch_error is not None:
            return epoch_error
        return None if self.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER

    # ---- leader: follower fetches and the high watermark --------------------------------
    def diverging_epoch(
        self, last_fetched_epoch: int, fetch_offset: int
    ) -> tuple[int, int] | ErrorCode | None:
        """L-8.4 (KIP-320/KIP-595, Kafka's ``validateFetchOffsetAndMaybeGetDivergingEpoch``):
        for a follower Fetch carrying ``last_fetched_epoch``, the ``(epoch, end_offset)`` to
        send as ``diverging_epoch`` (with no records) when the follower's log diverged from
        ours, OFFSET_OUT_OF_RANGE when we cannot tell (no end offset for that epoch, or the
        offset is below our log start), or None when it may read on.

        Diverged means: our end offset for ``last_fetched_epoch`` (the largest epoch we hold
        at or below it, and where it ends) has a smaller epoch, or ends before
        ``fetch_offset``. ``last_fetched_epoch`` -1 (an older follower) is never checked."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.leader_epoch_cache.end_offset_for(
            last_fetched_epoch, self.log.log_end_offset
        )
        if epoch < 0 or end < 0 or fetch_offset < self.log.log_start_offset:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def record_follower_fetch(
        self, replica: int, fetch_offset: int, log_start: int, leader_leo: int, now_ms: int
    ) -> None:
        """L-9: after a successful read for ``replica`` at ``fetch_offset`` (its LEO);
        ``leader_leo`` was sampled before the read."""
        fs = self.followers.get(replica)
        if fs is None:
            return
        fs.update(fetch_offset, log_start, leader_leo, now_ms)

    def forget_followers(self, brokers: Collection[int]) -> None:
        """The brokers left the cluster or came back in a new life (a new broker epoch): what
        this leader knew of their fetches outside the ISR no longer says anything about them,
        so they neither hold the HW nor count as caught up until they fetch again (KIP-903,
        where a replica whose broker epoch is stale is not ISR-eligible). ISR members keep
        their state: the controller removes them."""
        isr = self.maximal_isr
        for r in brokers:
            if r in self.followers and r not in isr:
                self.followers[r] = FollowerState()

    def maybe_advance_high_watermark(
        self, now_ms: int, lag_ms: int, eligible: Callable[[], Container[int]]
    ) -> bool:
        """L-11: True if the HW moved up.

        A follower outside the ISR that is caught up (within ``replica.lag.time.max.ms``) and
        may join the ISR (``eligible()``: live, not shutting down) holds the HW at its LEO too,
        as Kafka's ``maybeIncrementLeaderHW`` does: otherwise, with an ISR of the leader
        alone, the HW would run with the leader's LEO, the follower's LEO would never reach
        it, and the follower would never rejoin the ISR. A broker that died and was taken out
        of the ISR does not hold it. ``eligible`` is called only when a follower would hold
        the HW, which keeps the acks=1 append path from building the set.
        """
        if not self.is_leader or len(self.isr) < self.effective_min_isr:
            return False
        leo = self.log.log_end_offset
        candidate = leo
        isr = self.maximal_isr
        for r in isr:
            if r == self.broker_id:
                continue
            fs = self.followers.get(r)
            if fs is None or fs.leo == UNKNOWN_OFFSET:
                return False
            candidate = min(candidate, fs.leo)
        for r, fs in self.followers.items():
            if (
                r not in isr
                and fs.leo != UNKNOWN_OFFSET
                and fs.leo < candidate
                and fs.caught_up(leo, now_ms, lag_ms)
                and r in eligible()
            ):
                candidate = fs.leo
        if self.log.replicated and candidate <= self.log.high_watermark:
            return False
        self.log.set_high_watermark(candidate)
        return True

    def isr_to_expand(self, replica: int, live: set[int]) -> tuple[int, ...] | None:
        """L-15: the ISR with ``replica`` added, if it qualifies now."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        fs = self.followers.get(replica)
        if fs is None or replica in self.isr or replica not in live:
            return None
        if fs.leo < self.log.high_watermark or fs.leo < self.epoch_start_offset:
            return None
        return (*self.isr, replica)

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> tuple[int, ...] | None:
        """L-14: the ISR without the members that fell behind, if any did."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        leo = self.log.log_end_offset
        out = [
            r
            for r in self.isr
            if r != self.broker_id
            and not self.followers.get(r, FollowerState()).caught_up(leo, now_ms, lag_ms)
        ]
        if not out:
            return None
        return tuple(r for r in self.isr if r not in out)

    def isr_written(self, isr: tuple[int, ...], partition_epoch: int) -> None:
        """Our conditional ISR write succeeded (leader epoch unchanged, L-17/L-18)."""
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.pending_isr = None

    def state_with_isr(self, isr: tuple[int, ...]) -> PartitionState:
        return PartitionState(
            self.leader, self.leader_epoch, isr, self.controller_epoch, self.leader_recovery_state
        )

    def state_with_epoch_bump(self) -> PartitionState | None:
        """The state that takes this leader above its checkpoint's epochs, if it needs one."""
        if not self.is_leader or self.epoch_bump is None:
            return None
        return PartitionState(
            self.leader,
            self.epoch_bump,
            self.isr,
            self.controller_epoch,
            self.leader_recovery_state,
        )

    # ---- produce ------------------------------------------------------------------------
    def check_produce(self, acks: int) -> ErrorCode | None:
        """L-2, L-3: before the append."""
        if not self.is_leader or self.epoch_bump is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if acks == -1 and len(self.isr) < self.effective_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return None

    def produce_outcome(self, required_offset: int) -> ErrorCode | None:
        """L-7: the answer of a waiting acks=all append, or None to keep waiting."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) < self.effective_min_isr:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE
