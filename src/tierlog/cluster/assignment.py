"""Kafka's replica assignment at topic creation (spec/kafka-replication.md Z-14, Z-15).

A pure function, as Kafka's ``AdminUtils.assignReplicasToBrokers`` behaves (re-derived from
its documented rules, not its code):

* **Rack-unaware** (no broker has a rack). Brokers sorted by id, ``n`` of them. The first
  replica of partition ``p`` is broker ``(p + start) mod n``: leadership goes round the
  brokers, so leaders are balanced. The other replicas follow it at a distance of
  ``1 + (shift + j) mod (n - 1)`` for replica ``j``, never 0, so a partition never has two
  replicas on one broker; ``shift`` grows by one after each full round of ``n`` partitions,
  so followers do not always come in the same sequence.
* **Rack-aware** (every broker has a rack). The same walk over a *rack-alternated* broker
  list (racks sorted, brokers of each rack sorted, one broker of each rack in turn), with
  the shift multiplied by the number of racks. A candidate follower is skipped while it sits
  on a rack that already has a replica and some rack has none, or it already holds a replica
  and some broker holds none: each partition spreads over ``min(RF, racks)`` racks.
* Some brokers with a rack and others without is an error (checklist 51).
* ``start`` and ``shift`` are random unless ``fixed_start_index`` is given (>= 0), which
  sets both, as Kafka's tests do. ``start_partition_id`` numbers partitions added to an
  existing topic (CreatePartitions) so that the round-robin continues where it was.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from tierlog.protocol.errors import ErrorCode, KafkaError


class InvalidReplicationFactorError(ValueError):
    """Kafka's INVALID_REPLICATION_FACTOR: RF < 1 or more than the live brokers."""


class InvalidPartitionsError(ValueError):
    """Kafka's INVALID_PARTITIONS: fewer than one partition."""


class RackInformationError(ValueError):
    """Some brokers have a rack and some do not: rack-aware assignment is impossible."""


def assign_or_refuse(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
) -> dict[int, list[int]]:
    """``assign_replicas`` for the admin APIs (CreateTopics, CreatePartitions): what it
    refuses raised as the ``KafkaError`` those APIs answer with."""
    try:
        return assign_replicas(
            brokers, num_partitions, replication_factor, fixed_start_index, start_partition_id
        )
    except InvalidReplicationFactorError as e:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
    except InvalidPartitionsError as e:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, str(e)) from None
    except RackInformationError as e:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)) from None


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists by partition id for ``brokers`` (id to rack, None = no rack).

    The first replica of each list is the partition's preferred leader.
    """
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    racks = {b: r for b, r in brokers.items() if r is not None}
    if not racks:
        return _assign(
            sorted(brokers),
            {},
            num_partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rng or random.Random(),
        )
    if len(racks) < len(brokers):
        raise RackInformationError("Not all brokers have rack information.")
    return _assign(
        rack_alternated(racks),
        racks,
        num_partitions,
        replication_factor,
        fixed_start_index,
        start_partition_id,
        rng or random.Random(),
    )


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered one per rack in turn: racks sorted, brokers of a rack sorted."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    depth = max(len(c) for c in columns)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def _assign(
    arranged: list[int],
    racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rng: random.Random,
) -> dict[int, list[int]]:
    n = len(arranged)
    num_racks = len(set(racks.values())) or 1
    fixed = fixed_start_index >= 0
    start = fixed_start_index if fixed else rng.randrange(n)
    shift = fixed_start_index if fixed else rng.randrange(n)
    partition = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [arranged[first]]
        if racks:
            _add_rack_aware_followers(
                replicas, arranged, racks, first, shift * num_racks, replication_factor
            )
        else:
            replicas += [
                arranged[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
        assignment[partition] = replicas
        partition += 1
    return assignment


def _add_rack_aware_followers(
    replicas: list[int],
    arranged: list[int],
    racks: Mapping[int, str],
    first: int,
    shift: int,
    replication_factor: int,
) -> None:
    n = len(arranged)
    num_racks = len(set(racks.values()))
    racks_used = {racks[replicas[0]]}
    brokers_used = {replicas[0]}
    k = 0
    while len(replicas) < replication_factor:
        broker = arranged[_follower_index(first, shift, k, n)]
        k += 1
        rack = racks[broker]
        rack_ok = rack not in racks_used or len(racks_used) == num_racks
        broker_ok = broker not in brokers_used or len(brokers_used) == n
        if rack_ok and broker_ok:
            replicas.append(broker)
            racks_used.add(rack)
            brokers_used.add(broker)


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n
