"""The ZooKeeper client of a broker: kazoo, connected under the chroot of ``zookeeper.connect``.

What holds:

* ``start()`` creates a missing chroot first (through a short-lived client without chroot),
  as Kafka does, then connects under it and creates the persistent roots of ``paths``.
* Session events reach listeners as ``SessionEvent`` values, distinguishing a *new* session
  (first connect, or a reconnect after expiry: ephemerals and watches are gone and must be
  recreated) from a *resumed* one (same session after a disconnect: nothing was lost).
  kazoo itself opens a new session after an expiry; this client only reports it.
* Listeners run on kazoo's connection thread and must not block: they hand the event to
  their owner's own thread or queue (``contender.ClusterMember`` does).
* The owner of a ``ZooKeeperClient`` closes it; closing ends the session, so the server
  deletes this client's ephemerals at once.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from tierlog.cluster import paths
from tierlog.config.zookeeper_connect import ZooKeeperConnect

log = logging.getLogger(__name__)


class SessionEvent(enum.Enum):
    NEW_SESSION = "new_session"
    """Connected with a session this client did not have before."""
    RESUMED = "resumed"
    """Reconnected within the same session."""
    SUSPENDED = "suspended"
    """Disconnected; the session may still be alive on the server."""
    LOST = "lost"
    """The session expired or was closed: its ephemerals and watches are gone."""


SessionListener = Callable[[SessionEvent], None]


class ZooKeeperUnavailableError(RuntimeError):
    """No connection could be made within ``zookeeper.connection.timeout.ms``."""


class ZooKeeperClient:
    def __init__(
        self,
        connect: ZooKeeperConnect,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int = 18000,
    ) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._kazoo = KazooClient(hosts=str(connect), timeout=session_timeout_ms / 1000.0)
        self._listeners: list[SessionListener] = []
        self._lock = threading.Lock()
        self._session_id: int | None = None
        self._kazoo.add_listener(self._on_state)

    @property
    def kazoo(self) -> KazooClient:
        """The connected kazoo client (paths relative to the chroot)."""
        return self._kazoo

    @property
    def session_id(self) -> int | None:
        """Id of the current session, None while not connected."""
        client_id = self._kazoo.client_id
        return None if client_id is None else int(client_id[0])

    def add_session_listener(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def start(self) -> None:
        """Create the chroot if missing, connect under it and create the persistent roots."""
        timeout_s = self.connection_timeout_ms / 1000.0
        if self.connect.chroot is not None:
            root = KazooClient(
                hosts=self.connect.hosts_string, timeout=self.session_timeout_ms / 1000.0
            )
            try:
                root.start(timeout=timeout_s)
            except root.handler.timeout_exception:
                raise ZooKeeperUnavailableError(
                    f"no ZooKeeper at {self.connect.hosts_string} within {timeout_s}s"
                ) from None
            try:
                root.ensure_path(self.connect.chroot)
            finally:
                root.stop()
                root.close()
        try:
            self._kazoo.start(timeout=timeout_s)
        except self._kazoo.handler.timeout_exception:
            raise ZooKeeperUnavailableError(
                f"no ZooKeeper at {self.connect} within {timeout_s}s"
            ) from None
        for path in paths.PERSISTENT_ROOTS:
            self._kazoo.ensure_path(path)

    def close(self) -> None:
        """End the session (deleting its ephemerals) and release kazoo's threads."""
        self._kazoo.stop()
        self._kazoo.close()

    def _on_state(self, state: KazooState) -> None:
        if state == KazooState.CONNECTED:
            session = self.session_id
            event = (
                SessionEvent.RESUMED
                if session is not None and session == self._session_id
                else SessionEvent.NEW_SESSION
            )
            self._session_id = session
        elif state == KazooState.SUSPENDED:
            event = SessionEvent.SUSPENDED
        else:
            self._session_id = None
            event = SessionEvent.LOST
        log.info("ZooKeeper session %s (%s)", event.value, self._session_id)
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(event)
