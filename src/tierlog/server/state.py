"""What request handlers share: the broker's parts, assembled once by ``Broker``.

Handlers receive this object instead of reaching into globals, so a test can run several
brokers in one process and every dependency of a handler is visible in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tierlog.config.broker import BrokerConfig
from tierlog.log import LogManager
from tierlog.server.fetch_sessions import FetchSessionCache
from tierlog.server.group import GroupCoordinator
from tierlog.server.owned_writes import OwnedWrites
from tierlog.server.producer_ids import ProducerIdAllocator
from tierlog.server.purgatory import FetchPurgatory
from tierlog.server.quotas.manager import ClientQuotas
from tierlog.server.topics import TopicManager
from tierlog.server.txn_partition_hooks import AllowAllVerifier, TxnMarkerListener, TxnVerifier

if TYPE_CHECKING:
    from tierlog.replication.manager import ReplicaManager
    from tierlog.server.dynamic_config import DynamicBrokerConfig
    from tierlog.server.quotas.store import QuotaStore
    from tierlog.server.tiering import Tiering
    from tierlog.server.txn.coordinator import TxnCoordinator

#: Single-node mode: this broker leads every partition at this epoch.
LEADER_EPOCH = 0


@dataclass
class BrokerState:
    config: BrokerConfig
    cluster_id: str
    topics: TopicManager
    logs: LogManager
    purgatory: FetchPurgatory
    producer_ids: ProducerIdAllocator
    groups: GroupCoordinator
    #: (host, port) given to clients: the bound listener's (port 0 support) unless advertised.
    advertised: tuple[str, int]
    #: Incremental fetch sessions (KIP-227), bounded by max.incremental.fetch.session.cache.slots.
    fetch_sessions: FetchSessionCache
    #: The RemoteLogManager and its lifecycle hooks; None when tiered storage is off.
    tiering: Tiering | None = None
    #: Cluster mode's replication layer (leaders, ISR, acks=all); None in single-node mode.
    replication: ReplicaManager | None = None
    #: The transaction coordinator; None until it is built (it needs the listener).
    txn: TxnCoordinator | None = None
    #: KIP-890 verification of transactional produce; the coordinator replaces the default.
    txn_verifier: TxnVerifier = field(default_factory=AllowAllVerifier)
    #: Told of each transaction marker written here (the group coordinator's offsets).
    txn_marker_listener: TxnMarkerListener | None = None
    #: WriteTxnMarkers acknowledgements and what follows them, run to their end even when the
    #: coordinator that asked goes away (``handlers/txn_markers.py``).
    marker_writes: OwnedWrites = field(default_factory=OwnedWrites)
    #: Client quotas: every entity's settings and the clients' rates (none set: no cost).
    quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas(11, 1))
    #: Where quota settings are kept (state file or ZooKeeper); None until it is built.
    quota_store: QuotaStore | None = None
    #: Dynamic broker configs (AlterConfigs on BROKER resources); ``config`` is its current.
    dynamic_config: DynamicBrokerConfig | None = None
    shutting_down: bool = False

    @property
    def node_id(self) -> int:
        return self.config.node_id
