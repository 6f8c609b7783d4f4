"""A broker's whole part in the cluster: membership, its view, and the controller's duties
while it is controller.

``ClusterNode`` composes the pieces in a safe order: the member connects, registers and may
be elected during ``start``; the view starts next on the member's session; a controller is
started only once both exist, for the lease the member holds. On resignation (session lost,
another controller seen, or close) the controller of that epoch stops. Controller duties run
on their own thread (``PartitionController``); view changes only wake it.

The topic-level ``unclean.leader.election.enable`` (in ``/config/topics/<t>``) overrides the
broker default, as in Kafka.
"""

from __future__ import annotations

import logging
import threading

from kazoo.exceptions import NoNodeError

from tierlog.cluster import paths
from tierlog.cluster.cluster_view import ClusterView
from tierlog.cluster.controller import PartitionController
from tierlog.cluster.election import ControllerLease
from tierlog.cluster.fencing import FencedWriter
from tierlog.cluster.member import ClusterMember
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.znodes import TopicConfigOverrides, ZnodeFormatError
from tierlog.config import ConfigError
from tierlog.config.topic_keys import TOPIC_KEYS

log = logging.getLogger(__name__)

UNCLEAN_KEY = "unclean.leader.election.enable"


class ClusterNode:
    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        self.member = ClusterMember(settings, self._elected, self._resigned)
        self.view: ClusterView | None = None
        self.controller: PartitionController | None = None
        self._lease: ControllerLease | None = None
        self._lock = threading.Lock()

    @property
    def broker_id(self) -> int:
        return self.settings.broker_id

    @property
    def controller_id(self) -> int | None:
        return self.member.controller_id

    def start(self) -> None:
        self.member.start()
        view = ClusterView(self.member.zk.kazoo)
        try:
            view.start()
        except Exception:
            self.member.close()
            raise
        with self._lock:
            self.view = view
            self._start_controller()

    def close(self) -> None:
        self.member.close()
        with self._lock:
            self._stop_controller()
            if self.view is not None:
                self.view.close()

    # ---- member callbacks (the member's thread) ----------------------------------------
    def _elected(self, lease: ControllerLease) -> None:
        with self._lock:
            self._lease = lease
            self._start_controller()

    def _resigned(self) -> None:
        with self._lock:
            self._lease = None
            self._stop_controller()

    def _start_controller(self) -> None:
        if self._lease is None or self.view is None or self.controller is not None:
            return
        writer = FencedWriter(self.member.zk.kazoo, self._lease)
        controller = PartitionController(
            self.view, writer, self._unclean_allowed, self.settings.controller
        )
        self.view.add_listener(controller.on_view_change)
        controller.start()
        self.controller = controller

    def _stop_controller(self) -> None:
        controller, self.controller = self.controller, None
        if controller is None:
            return
        if self.view is not None:
            self.view.remove_listener(controller.on_view_change)
        controller.close()

    def _unclean_allowed(self, topic: str) -> bool:
        try:
            data, _ = self.member.zk.kazoo.get(paths.topic_config(topic))
            value = TopicConfigOverrides.decode(data).config.get(UNCLEAN_KEY)
        except (NoNodeError, ZnodeFormatError):
            value = None
        if value is None:
            return self.settings.unclean_leader_election_enable
        try:
            return bool(TOPIC_KEYS[UNCLEAN_KEY].parse(value))
        except ConfigError as e:
            log.warning("topic %s: %s; using the broker default", topic, e)
            return self.settings.unclean_leader_election_enable
