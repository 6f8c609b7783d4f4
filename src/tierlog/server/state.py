"""What request handlers share: the broker's parts, assembled once by ``Broker``.

Handlers receive this object instead of reaching into globals, so a test can run several
brokers in one process and every dependency of a handler is visible in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tierlog.config.broker import BrokerConfig
from tierlog.server.producer_ids import ProducerIdAllocator
from tierlog.server.purgatory import FetchPurgatory
from tierlog.server.topics import TopicManager

if TYPE_CHECKING:
    from tierlog.server.tiering import Tiering

#: Single-node mode: this broker leads every partition at this epoch.
LEADER_EPOCH = 0


@dataclass
class BrokerState:
    config: BrokerConfig
    cluster_id: str
    topics: TopicManager
    logs: Any
    purgatory: FetchPurgatory
    producer_ids: ProducerIdAllocator
    groups: Any = None
    #: Tiered read path (``TieredReadHooks``); None when tiered storage is off.
    remote_reader: Any = None
    #: The RemoteLogManager and its lifecycle hooks; None when tiered storage is off.
    tiering: Tiering | None = None
    #: (host, port) given to clients; filled in once the listener is bound (port 0 support).
    advertised: tuple[str, int] = ("127.0.0.1", 9092)
    shutting_down: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def node_id(self) -> int:
        return self.config.node_id
