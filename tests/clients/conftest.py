"""The client matrix: every test that takes ``driver`` runs once per real Kafka client."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.real_clients import (
    AiokafkaDriver,
    ConfluentDriver,
    Driver,
    KafkaPythonDriver,
    KcatDriver,
)

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kcat")


@pytest.fixture(params=CLIENTS)
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Driver:
    name = request.param
    if name == "confluent-kafka":
        return ConfluentDriver()
    if name == "kafka-python":
        return KafkaPythonDriver()
    if name == "aiokafka":
        return AiokafkaDriver()
    return KcatDriver(tmp_path / "kcat")
