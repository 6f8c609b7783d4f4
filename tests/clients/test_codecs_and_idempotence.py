"""Every compression codec and the idempotent producer, per client.

kcat's producer compresses only with zstd against a Kafka 4 broker (see ``KcatDriver``), so
for the other codecs its test consumes batches compressed by confluent-kafka.

Besides the round trip, the tests read the partition's ``.log`` files: a codec test only
proves something if the batches on disk really carry that codec, and an idempotence test
only if they carry a producer id and dense sequence numbers.
"""

from __future__ import annotations

import pytest

from tests.clients.real_clients import (
    CODEC_IDS,
    CODECS,
    ConfluentDriver,
    Driver,
    create_topic,
    disk_batches,
    values,
)
from tests.helpers.broker import BrokerProcess

COUNT = 200


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_round_trip(module_broker: BrokerProcess, driver: Driver, codec: str) -> None:
    topic = f"codec-{driver.name}-{codec}"
    create_topic(module_broker.bootstrap, topic)
    sent = values(f"{codec}-compressible-payload-{'x' * 40}", COUNT)
    # a client that cannot compress with this codec still has to decode it
    producer = driver if codec in driver.produce_codecs else ConfluentDriver()
    producer.produce(module_broker.bootstrap, topic, [(0, v) for v in sent], codec=codec)

    got = driver.consume_assigned(module_broker.bootstrap, topic, 0, COUNT)
    assert [v for _, _, v in got] == sent
    assert [o for _, o, _ in got] == list(range(COUNT))
    batches = list(disk_batches(module_broker.log_dir / f"{topic}-0"))
    assert sum(b.record_count for b in batches) == COUNT
    assert {b.codec for b in batches} == {CODEC_IDS[codec]}


def test_idempotent_producer_is_dup_free_and_ordered(
    module_broker: BrokerProcess, driver: Driver
) -> None:
    topic = f"idem-{driver.name}"
    create_topic(module_broker.bootstrap, topic)
    sent = values(f"idem-{driver.name}", COUNT)
    driver.produce(module_broker.bootstrap, topic, [(0, v) for v in sent], idempotent=True)

    got = driver.consume_assigned(module_broker.bootstrap, topic, 0, COUNT)
    assert [v for _, _, v in got] == sent
    batches = list(disk_batches(module_broker.log_dir / f"{topic}-0"))
    assert len({b.producer_id for b in batches}) == 1
    assert batches[0].producer_id >= 0
    # one producer session: sequences start at 0 and are dense across batches
    assert [b.base_sequence for b in batches] == [
        sum(x.record_count for x in batches[:i]) for i in range(len(batches))
    ]
