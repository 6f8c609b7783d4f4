"""Produce then consume with assign(), per client: offsets dense from 0, values in order."""

from __future__ import annotations

from tests.clients.real_clients import Driver, create_topic, values
from tests.helpers.broker import BrokerProcess


def test_produce_and_consume_with_assign(module_broker: BrokerProcess, driver: Driver) -> None:
    topic = f"assign-{driver.name}"
    create_topic(module_broker.bootstrap, topic, partitions=2)
    sent = {p: values(f"{driver.name}-p{p}", 150) for p in (0, 1)}
    driver.produce(module_broker.bootstrap, topic, [(p, v) for p in (0, 1) for v in sent[p]])
    for p in (0, 1):
        got = driver.consume_assigned(module_broker.bootstrap, topic, p, 150)
        assert [v for _, _, v in got] == sent[p]
        assert [o for _, o, _ in got] == list(range(150))
        assert {part for part, _, _ in got} == {p}
