"""Controller election through the ephemeral ``/controller`` znode (Z-1, checklist 43).

One attempt is one multi-op: create the ephemeral ``/controller`` naming this broker *and*
set ``/controller_epoch`` to the epoch read plus one, conditional on the version read. Either
both happen or neither, so two contenders can never both win, and each win moves the epoch
and its znode version. The version the winner wrote is its fencing token
(``fencing.FencedWriter``): any later election changes it, and every write of the deposed
controller then fails.

An attempt whose reply was lost (connection loss) is settled by re-reading: if
``/controller`` names this broker and belongs to this session, the attempt won.
"""

from __future__ import annotations

from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.znodes import (
    ControllerRegistration,
    decode_controller_epoch,
    encode_controller_epoch,
)


@dataclass(frozen=True)
class ControllerLease:
    """What an elected controller holds: its epoch and ``/controller_epoch``'s znode version
    after its election (the condition of every write it makes)."""

    broker_id: int
    epoch: int
    epoch_zk_version: int


def read_controller(zk: KazooClient) -> int | None:
    """The broker id in ``/controller``, or None when no controller is elected."""
    try:
        data, _ = zk.get(paths.CONTROLLER)
    except NoNodeError:
        return None
    return ControllerRegistration.decode(data).broker_id


def read_controller_epoch(zk: KazooClient) -> tuple[int, int]:
    """``(epoch, znode version)`` of ``/controller_epoch``, creating it as ``0`` if absent."""
    while True:
        try:
            data, stat = zk.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                zk.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(0))
            except NodeExistsError:
                pass
            continue
        return decode_controller_epoch(data), int(stat.version)


def elect_controller(zk: KazooClient, broker_id: int, now_ms: int) -> ControllerLease | None:
    """Try once to become controller; the lease if this broker is controller, else None."""
    mine = _held_lease(zk, broker_id)
    if mine is not None or read_controller(zk) is not None:
        return mine
    epoch, version = read_controller_epoch(zk)
    tx = zk.transaction()
    tx.create(paths.CONTROLLER, ControllerRegistration(broker_id, now_ms).encode(), ephemeral=True)
    tx.set_data(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=version)
    results = tx.commit()
    if not any(isinstance(r, Exception) for r in results):
        return ControllerLease(broker_id, epoch + 1, int(results[1].version))
    if not any(isinstance(r, NodeExistsError | BadVersionError) for r in results):
        raise next(r for r in results if isinstance(r, Exception))
    return _held_lease(zk, broker_id)


def _held_lease(zk: KazooClient, broker_id: int) -> ControllerLease | None:
    """This session's lease if ``/controller`` is this broker's own ephemeral znode."""
    try:
        data, stat = zk.get(paths.CONTROLLER)
    except NoNodeError:
        return None
    client_id = zk.client_id
    if (
        ControllerRegistration.decode(data).broker_id != broker_id
        or client_id is None
        or stat.ephemeralOwner != client_id[0]
    ):
        return None
    epoch, version = read_controller_epoch(zk)
    return ControllerLease(broker_id, epoch, version)
