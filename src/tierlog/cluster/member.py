"""A broker's membership of the cluster: registered in ``/brokers/ids`` and contending for
controller, for as long as it runs.

``ClusterMember`` owns the ``ZooKeeperClient`` and one thread that makes every decision, fed
by a queue: session events, ``/controller`` watch events and the stop request. One thread
means no two decisions race, and kazoo's callback threads never block (they only enqueue).

* **New session** (start, or after an expiry): register ``/brokers/ids/<id>`` (new broker
  epoch; a crashed predecessor's znode is waited out for up to a session timeout), then
  look at ``/controller`` (arming its watch) and try to be elected if it is free. The
  server may serve stale reads after a reconnect, so it is synced first.
* **Session lost:** the registration and ``/controller`` of the old session are gone; a
  controller resigns at once (``on_resigned``), before any new session can elect another.
* **``/controller`` changed:** re-read and re-arm; when it is free, try to be elected
  (``on_elected`` with the lease); when another broker holds it, resign if this one held it.
* Errors of a round (a connection lost mid-way) are logged; the next session event repeats
  the round, so nothing is retried in a busy loop.

Callbacks run on the member's thread; they must hand work to their own owners quickly.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import KazooException
from kazoo.protocol.states import WatchedEvent

from tierlog.cluster import paths
from tierlog.cluster.election import ControllerLease, elect_controller, read_controller
from tierlog.cluster.registration import BrokerIdInUseError, RegisteredBroker, register_broker
from tierlog.cluster.settings import ClusterSettings
from tierlog.cluster.znodes import BrokerRegistration
from tierlog.cluster.zookeeper import SessionEvent, ZooKeeperClient

log = logging.getLogger(__name__)

PREDECESSOR_MARGIN_S = 5.0
"""How much longer than a session timeout to wait for a crashed predecessor's registration."""


@dataclass(frozen=True)
class _ControllerChanged:
    pass


@dataclass(frozen=True)
class _Stop:
    pass


_Event = SessionEvent | _ControllerChanged | _Stop


class ClusterMember:
    def __init__(
        self,
        settings: ClusterSettings,
        on_elected: Callable[[ControllerLease], None] | None = None,
        on_resigned: Callable[[], None] | None = None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.settings = settings
        self.zk = ZooKeeperClient(
            settings.zookeeper, settings.session_timeout_ms, settings.connection_timeout_ms
        )
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._clock_ms = clock_ms
        self._events: queue.Queue[_Event] = queue.Queue()
        self._thread = threading.Thread(
            target=self._run, name=f"cluster-member-{settings.broker_id}", daemon=True
        )
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self.registered: RegisteredBroker | None = None
        self.lease: ControllerLease | None = None
        self.controller_id: int | None = None
        self.zk.add_session_listener(self._events.put)

    @property
    def broker_id(self) -> int:
        return self.settings.broker_id

    @property
    def is_controller(self) -> bool:
        return self.lease is not None

    def start(self, timeout_s: float | None = None) -> None:
        """Connect, register and take part in the first election; raise if that fails."""
        self._thread.start()
        if timeout_s is None:
            timeout_s = (
                self.settings.connection_timeout_ms + self.settings.session_timeout_ms
            ) / 1000 + PREDECESSOR_MARGIN_S
        wait_s = timeout_s
        if not self._started.wait(wait_s + 5.0):
            self.close()
            raise TimeoutError(f"broker {self.broker_id} did not register within {wait_s}s")
        if self._start_error is not None:
            self.close()
            raise self._start_error

    def close(self) -> None:
        """Resign, end the session (deleting this broker's ephemerals) and stop the thread."""
        if self._thread.is_alive():
            self._events.put(_Stop())
            self._thread.join()
        self._resign()
        self.zk.close()

    # ---- the member's thread ---------------------------------------------------------
    def _run(self) -> None:
        try:
            self.zk.start()
        except Exception as e:
            self._start_error = e
            self._started.set()
            return
        while True:
            event = self._events.get()
            if isinstance(event, _Stop):
                return
            try:
                self._handle(event)
            except BrokerIdInUseError as e:
                log.error("%s", e)
                self._start_error = e
                self._started.set()
                return
            except KazooException as e:
                log.warning("broker %d: ZooKeeper round failed: %r", self.broker_id, e)

    def _handle(self, event: _Event) -> None:
        if event is SessionEvent.NEW_SESSION:
            self.zk.kazoo.sync(paths.CONTROLLER)
            self.registered = register_broker(
                self.zk.kazoo,
                self._registration(),
                wait_s=self.settings.session_timeout_ms / 1000 + PREDECESSOR_MARGIN_S,
            )
            log.info(
                "broker %d registered (broker epoch %d)",
                self.broker_id,
                self.registered.broker_epoch,
            )
            self._check_controller()
            self._started.set()
        elif event is SessionEvent.RESUMED:
            self._check_controller()
        elif event is SessionEvent.LOST:
            self.registered = None
            self._resign()
        elif isinstance(event, _ControllerChanged) and self.zk.session_id is not None:
            self._check_controller()

    def _check_controller(self) -> None:
        self.zk.kazoo.exists(paths.CONTROLLER, watch=self._on_controller_watch)
        if self.lease is None:
            lease = elect_controller(self.zk.kazoo, self.broker_id, self._clock_ms())
            if lease is not None:
                self.lease = lease
                log.info("broker %d is controller (epoch %d)", self.broker_id, lease.epoch)
                if self._on_elected is not None:
                    self._on_elected(lease)
        self.controller_id = read_controller(self.zk.kazoo)
        if self.controller_id != self.broker_id:
            self._resign()

    def _on_controller_watch(self, _event: WatchedEvent) -> None:
        self._events.put(_ControllerChanged())

    def _resign(self) -> None:
        if self.lease is None:
            return
        log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.lease.epoch)
        self.lease = None
        if self._on_resigned is not None:
            self._on_resigned()

    def _registration(self) -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=self.broker_id,
            endpoints=self.settings.advertised_listeners,
            rack=self.settings.rack,
            timestamp_ms=self._clock_ms(),
        )
