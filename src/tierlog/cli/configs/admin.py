"""Where ``tierlog configs`` sends each request, as Kafka's admin client sends it: a specific
broker's configs to that broker (only it answers for itself), everything else (topics, the
cluster-wide broker default, client quotas, SCRAM credentials) to the bootstrap broker."""

from __future__ import annotations

from typing import Any

from tierlog.cli.common import CLIENT_ID
from tierlog.cli.coordinators import error_name
from tierlog.client import BrokerConnections, WireConnection
from tierlog.protocol.api_keys import ApiKey


class ConfigsError(Exception):
    """What Kafka's tool reports with the message only (its IllegalArgumentException and
    InvalidConfigurationException): ``Error: <message>``, exit 1."""


class BrokerRefused(Exception):
    """A broker's error answer, reported as Kafka's tool reports a failed admin call."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(f"{error_name(code)}: {message}" if message else error_name(code))
        self.code = code


def checked(code: int, message: str | None) -> None:
    """Raise ``BrokerRefused`` unless ``code`` is NONE."""
    if int(code) != 0:
        raise BrokerRefused(int(code), message)


class ConfigsAdmin:
    """The bootstrap connection, the cluster's brokers from its Metadata, and a connection
    to each broker asked, opened on first use and closed together."""

    def __init__(self, bootstrap: WireConnection) -> None:
        self.bootstrap = bootstrap
        self._metadata: Any = None
        self._brokers: BrokerConnections | None = None

    def metadata(self) -> Any:
        if self._metadata is None:
            self._metadata = self.bootstrap.call(
                ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False
            )
        return self._metadata

    def broker_ids(self) -> list[int]:
        return sorted(int(b.node_id) for b in self.metadata().brokers)

    def topic_names(self) -> list[str]:
        """Every topic, internal ones included (Kafka lists them with ``listInternal``)."""
        return sorted(str(t.name) for t in self.metadata().topics if int(t.error_code) == 0)

    def to_broker(self, broker_id: int) -> WireConnection:
        """A connection to ``broker_id``; a broker the cluster does not list is an error
        (Kafka's admin client would wait for it until its timeout)."""
        if self._brokers is None:
            self._brokers = BrokerConnections(self.bootstrap, self.metadata(), CLIENT_ID)
        if not self._brokers.knows(broker_id):
            listed = ", ".join(map(str, self.broker_ids()))
            raise ConfigsError(f"Broker {broker_id} is not in the cluster (brokers: {listed})")
        return self._brokers.to(broker_id)

    def close(self) -> None:
        if self._brokers is not None:
            self._brokers.close()
