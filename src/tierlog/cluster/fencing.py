"""Epoch-fenced writes of an elected controller (Z-2, checklist 42).

Every write the controller makes is a multi-op whose first operation checks that
``/controller_epoch`` still has the znode version of the controller's election. A later
election changes that version, so once a controller is deposed, even one that does not know
it yet (a long GC pause, a partitioned host), none of its writes can land:
``ControllerMovedError`` says so, and its owner must resign. Conditions of the write itself
(for example the version of a partition state znode read earlier) are kept: their failure
raises kazoo's own error (``BadVersionError``, ``NodeExistsError``...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import RolledBackError
from kazoo.protocol.states import ZnodeStat

from tierlog.cluster import paths
from tierlog.cluster.election import ControllerLease


class ControllerMovedError(RuntimeError):
    """The controller epoch moved on: this broker is no longer the controller."""


class FencedWriter:
    def __init__(self, zk: KazooClient, lease: ControllerLease) -> None:
        self.zk = zk
        self.lease = lease

    def commit(self, build: Callable[[TransactionRequest], None]) -> list[Any]:
        """Run the operations ``build`` adds to a transaction, behind the epoch check.

        Returns the operations' results (without the check's).
        """
        tx = self.zk.transaction()
        tx.check(paths.CONTROLLER_EPOCH, self.lease.epoch_zk_version)
        build(tx)
        results: list[Any] = tx.commit()
        check, rest = results[0], results[1:]
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            raise ControllerMovedError(
                f"controller epoch {self.lease.epoch} of broker {self.lease.broker_id} "
                "is no longer current"
            )
        for result in rest:
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise result
        return rest

    def create(self, path: str, data: bytes) -> None:
        self.commit(lambda tx: tx.create(path, data))

    def set_data(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        stat: ZnodeStat = self.commit(lambda tx: tx.set_data(path, data, version))[0]
        return stat

    def delete(self, path: str, version: int = -1) -> None:
        self.commit(lambda tx: tx.delete(path, version))
