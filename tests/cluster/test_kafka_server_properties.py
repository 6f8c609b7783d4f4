"""A Kafka 3.7 ZooKeeper-mode ``server.properties``, as an operator keeps one, starts tierlog
unchanged: the keys tierlog honours, the ones it accepts without effect and the deprecated
ones all load, and the broker then serves a produce and a consumer group's read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers.broker import BrokerProcess

#: Kafka's sample server.properties (ZooKeeper mode) with what production files commonly add.
#: ``{zk}`` and ``{logs}`` are filled in by the test.
KAFKA_37_SERVER_PROPERTIES = """\
############################# Server Basics #############################
broker.id=0
broker.id.generation.enable=true
reserved.broker.max.id=1000

############################# Socket Server Settings #############################
listeners=PLAINTEXT://127.0.0.1:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
listener.security.protocol.map=PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
background.threads=10
queued.max.requests=500
queued.max.request.bytes=-1
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
socket.listen.backlog.size=50
max.connections=10000
max.connections.per.ip=1000
max.connections.per.ip.overrides=127.0.0.1:2000
max.connection.creation.rate=2147483647
request.timeout.ms=30000

############################# Log Basics #############################
log.dirs={logs}
num.partitions=1
num.recovery.threads.per.data.dir=1
num.replica.alter.log.dirs.threads=2
log.message.format.version=2.8
log.message.timestamp.type=CreateTime
log.message.timestamp.difference.max.ms=9223372036854775807
log.message.downconversion.enable=true
log.cleaner.enable=true
log.cleaner.io.buffer.size=524288
log.dir.failure.timeout.ms=30000

############################# Internal Topic Settings  #############################
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
offset.metadata.max.bytes=4096
group.max.size=2147483647

############################# Log Flush Policy #############################
log.flush.interval.messages=9223372036854775807
log.flush.scheduler.interval.ms=9223372036854775807
log.flush.offset.checkpoint.interval.ms=60000
log.flush.start.offset.checkpoint.interval.ms=60000

############################# Log Retention Policy #############################
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000

############################# Replication #############################
default.replication.factor=1
min.insync.replicas=1
unclean.leader.election.enable=false
inter.broker.protocol.version=3.7-IV4
replica.lag.time.max.ms=30000
replica.socket.timeout.ms=30000
replica.socket.receive.buffer.bytes=65536
replica.fetch.max.bytes=1048576
replica.fetch.wait.max.ms=500
replica.high.watermark.checkpoint.interval.ms=5000
num.replica.fetchers=1
producer.purgatory.purge.interval.requests=1000
fetch.purgatory.purge.interval.requests=1000
delete.records.purgatory.purge.interval.requests=1
controller.socket.timeout.ms=30000
controlled.shutdown.enable=true
auto.leader.rebalance.enable=true
delete.topic.enable=true
producer.id.expiration.ms=86400000

############################# Zookeeper #############################
zookeeper.connect={zk}
zookeeper.connection.timeout.ms=18000
zookeeper.session.timeout.ms=18000
zookeeper.set.acl=false
zookeeper.max.in.flight.requests=10

############################# Metrics and plugins #############################
metric.reporters=
metrics.num.samples=2
metrics.sample.window.ms=30000
metrics.recording.level=INFO
auto.include.jmx.reporter=true
kafka.metrics.reporters=
kafka.metrics.polling.interval.secs=10
create.topic.policy.class.name=
alter.config.policy.class.name=
client.quota.callback.class=
quota.window.num=11
quota.window.size.seconds=1
password.encoder.secret=change-me

############################# Group Coordinator Settings #############################
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
"""


def test_kafka_37_zookeeper_mode_server_properties_starts_and_serves(
    broker_factory: Callable[..., BrokerProcess], zk_connect: str, tmp_path: Path
) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        KAFKA_37_SERVER_PROPERTIES.format(zk=zk_connect, logs=tmp_path / "kafka-logs"),
        encoding="utf-8",
    )
    b = broker_factory(
        {"log.dirs": str(tmp_path / "kafka-logs")}, config_file=props, use_test_defaults=False
    )
    servers = b.bootstrap

    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic("orders", 2, 1)]).values():
        future.result(30)

    producer = confluent_kafka.Producer({"bootstrap.servers": servers, "acks": "all"})
    for i in range(20):
        producer.produce("orders", key=b"k%d" % (i % 4), value=b"order-%02d" % i)
    assert producer.flush(30) == 0

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "sample-properties",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["orders"])
    got: list[bytes] = []
    for _ in range(300):
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            value = msg.value()
            assert value is not None
            got.append(value)
        if len(got) == 20:
            break
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == [b"order-%02d" % i for i in range(20)]
    assert b.stop() == 0
