"""A broker's ephemeral ``/brokers/ids/<id>``: its presence is the broker's liveness.

The znode lives as long as the ZooKeeper session that created it; its czxid is the broker
epoch, so a broker that bounces (new session) has a larger epoch and the controller treats
it as a failure followed by a startup (Z-5). Registration is a *checked* ephemeral create
(Z-4): if the znode exists and belongs to the current session (a create whose reply was
lost), that is success; if it belongs to another session, the id is taken.

A broker restarted right after a crash (kill -9) finds its previous session's znode still
there until that session expires. ``register_broker`` therefore waits up to ``wait_s``
(the broker passes its session timeout plus a margin) for the other session's znode to go,
watching it rather than polling, and only then declares the id taken: a second live broker
with the same id holds it forever, a crashed predecessor does not.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.znodes import BrokerRegistration


class BrokerIdInUseError(RuntimeError):
    """Another live session holds ``/brokers/ids/<id>``: two brokers share a node.id."""


@dataclass(frozen=True)
class RegisteredBroker:
    registration: BrokerRegistration
    broker_epoch: int
    """The registration znode's czxid."""


def register_broker(
    zk: KazooClient, registration: BrokerRegistration, wait_s: float = 0.0
) -> RegisteredBroker:
    """Create the broker's ephemeral registration in the current session."""
    path = paths.broker(registration.broker_id)
    data = registration.encode()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            _, stat = zk.create(path, data, ephemeral=True, include_data=True)
        except NodeExistsError:
            gone = threading.Event()
            try:
                _, stat = zk.get(path, watch=lambda _event, g=gone: g.set())
            except NoNodeError:
                continue
            if stat.ephemeralOwner != zk.client_id[0]:
                remaining = deadline - time.monotonic()
                if remaining > 0 and gone.wait(remaining):
                    continue
                raise BrokerIdInUseError(
                    f"{path} is held by another ZooKeeper session "
                    f"(0x{stat.ephemeralOwner:x}): node.id {registration.broker_id} is taken"
                ) from None
        return RegisteredBroker(registration, int(stat.czxid))


def live_brokers(zk: KazooClient) -> dict[int, BrokerRegistration]:
    """The registered brokers by id (a znode that vanishes while being read is skipped)."""
    found: dict[int, BrokerRegistration] = {}
    for child in zk.get_children(paths.BROKER_IDS):
        try:
            data, _ = zk.get(f"{paths.BROKER_IDS}/{child}")
        except NoNodeError:
            continue
        found[int(child)] = BrokerRegistration.decode(int(child), data)
    return found
