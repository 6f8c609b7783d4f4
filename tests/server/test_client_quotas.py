"""Client quotas on a real single-node broker: AlterClientQuotas / DescribeClientQuotas as
``kafka-configs.sh`` uses them (Kafka's validation, filters, ``validate_only``), the
precedence of specific entities over defaults, a producer and a consumer held to their byte
rates with every record delivered once and the throttle time in the responses, a client
without a quota left alone, a muted connection that is not idle, and quotas surviving a
restart.

The brokers measure rates over 2 samples of 1 s (``quota.window.num`` /
``quota.window.size.seconds``), so a client's burst allowance is one second of its rate
and N bytes take at least about N / R - 2 s: a lower bound that a slow machine cannot break.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable

import confluent_kafka as ck
import kafka

from tests.helpers import client_quotas as cq
from tests.helpers.broker import BrokerProcess
from tests.helpers.poll import holds_for, wait_until
from tests.helpers.wire import connection_closed, produce_request, raw_connection, recv_frame
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import decode_response, encode_request, request_schema

Factory = Callable[..., BrokerProcess]

WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
RATE = 64 * 1024
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35
THROTTLED = "tierlog_client_quota_throttled_responses_total"


def _topic(b: BrokerProcess, name: str) -> None:
    with WireConnection(*b.host_port) as conn:
        assert conn.create_topic(name, 1)[0] == 0


def _produce_all(
    b: BrokerProcess, topic: str, client_id: str, count: int, size: int
) -> tuple[float, list[float]]:
    """``count`` records of ``size`` bytes (each value starts with its number) through a
    confluent-kafka producer; (seconds until all were acknowledged, throttle times seen)."""
    throttles: list[float] = []
    p = ck.Producer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "batch.size": 16384,
            "enable.idempotence": True,
            "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
        }
    )
    failed: list[object] = []
    started = time.monotonic()
    for i in range(count):
        p.produce(
            topic,
            value=b"%08d" % i + b"p" * (size - 8),
            partition=0,
            on_delivery=lambda err, _msg: failed.append(err) if err is not None else None,
        )
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - started
    assert failed == []
    return elapsed, throttles


def _consume_all(
    b: BrokerProcess, topic: str, client_id: str, count: int, throttled: bool = False
) -> tuple[float, list[bytes], list[float]]:
    """Read ``count`` records from the start; (seconds, values, throttle times seen). A
    ``throttled`` consumer polls on until librdkafka has reported a throttle time."""
    throttles: list[float] = []
    c = ck.Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "client.id": client_id,
            "group.id": f"g-{client_id}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
        }
    )
    values: list[bytes] = []
    started = time.monotonic()
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        deadline = started + 60
        while len(values) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            assert value is not None
            values.append(value)
        elapsed = time.monotonic() - started
        while throttled and not throttles and time.monotonic() < deadline:
            c.poll(0.05)
    finally:
        c.close()
    return elapsed, values, throttles


def test_alter_and_describe_follow_kafka_validation_and_filters(broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    with WireConnection(*broker.host_port) as conn:
        versions = conn.call(
            ApiKey.API_VERSIONS, 3, client_software_name="t", client_software_version="1"
        )
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
    assert ranges[ApiKey.DESCRIBE_CLIENT_QUOTAS] == (0, 1)
    assert ranges[ApiKey.ALTER_CLIENT_QUOTAS] == (0, 1)

    # validate_only checks and writes nothing
    assert cq.alter(bs, {"client-id": "a"}, {"producer_byte_rate": 1000}, validate_only=True) == (
        0,
        None,
    )
    assert cq.describe(bs)[2] == {}

    refused: list[tuple[dict[str, str | None], dict[str, float], str]] = [
        ({"client-id": "a"}, {"bogus": 1.0}, "Invalid configuration key bogus"),
        ({"client-id": "a"}, {"producer_byte_rate": 1.5}, "must be a LONG value"),
        ({"client-id": "a"}, {"consumer_byte_rate": -5.0}, "must be a positive number"),
        ({"client-id": "a"}, {"controller_mutation_rate": 0.0}, "must be a positive number"),
        ({"ip": "not-an-ip"}, {"connection_creation_rate": 5.0}, "not a valid IP address"),
        ({"ip": "1.2.3.4"}, {"producer_byte_rate": 5.0}, "Invalid configuration key"),
        ({}, {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
        ({"group": "g"}, {"producer_byte_rate": 1.0}, "Unhandled client quota entity type"),
        ({"user": ""}, {"producer_byte_rate": 1.0}, "Empty user not supported"),
        ({"user": "u", "ip": "1.2.3.4"}, {"producer_byte_rate": 1.0}, "IP entity"),
    ]
    for entity, values, message in refused:
        code, text = cq.alter(bs, entity, values)
        assert code == INVALID_REQUEST and text is not None and message in text, (entity, text)

    # each entry stands alone: the valid one is written, the invalid one is not
    answers = cq.alter_entries(
        bs,
        [
            cq.entry({"client-id": "a"}, {"producer_byte_rate": 1000}),
            cq.entry({"client-id": "b"}, {"nope": 1.0}),
        ],
    )
    assert answers[0] == (0, None) and answers[1][0] == INVALID_REQUEST
    settings: list[tuple[dict[str, str | None], dict[str, float]]] = [
        ({"client-id": None}, {"producer_byte_rate": 2000.0}),
        ({"user": "ANONYMOUS"}, {"consumer_byte_rate": 3000.0}),
        ({"user": "ANONYMOUS", "client-id": "a"}, {"request_percentage": 25.5}),
        ({"user": None, "client-id": None}, {"producer_byte_rate": 4000.0}),
    ]
    for setting, values in settings:
        assert cq.alter(bs, setting, values) == (0, None)

    a = (("client-id", "a"),)
    default_client = (("client-id", None),)
    anonymous = (("user", "ANONYMOUS"),)
    anonymous_a = (("client-id", "a"), ("user", "ANONYMOUS"))
    defaults = (("client-id", None), ("user", None))
    assert cq.describe(bs)[2] == {
        a: {"producer_byte_rate": 1000.0},
        default_client: {"producer_byte_rate": 2000.0},
        anonymous: {"consumer_byte_rate": 3000.0},
        anonymous_a: {"request_percentage": 25.5},
        defaults: {"producer_byte_rate": 4000.0},
    }
    specified_user = [("user", cq.MATCH_SPECIFIED, None)]
    assert set(cq.describe(bs, specified_user, strict=True)[2]) == {anonymous}
    assert set(cq.describe(bs, specified_user)[2]) == {anonymous, anonymous_a, defaults}
    exact_user = [("user", cq.MATCH_EXACT, "ANONYMOUS")]
    assert set(cq.describe(bs, exact_user)[2]) == {anonymous, anonymous_a}
    default_client_only = [("client-id", cq.MATCH_DEFAULT, None)]
    assert set(cq.describe(bs, default_client_only, strict=True)[2]) == {default_client}
    assert set(cq.describe(bs, [("client-id", cq.MATCH_EXACT, "a")])[2]) == {a, anonymous_a}
    both_defaults = [("user", cq.MATCH_DEFAULT, None), ("client-id", cq.MATCH_DEFAULT, None)]
    assert set(cq.describe(bs, both_defaults, strict=True)[2]) == {defaults}
    assert cq.describe(bs, [], strict=True)[2] == {}

    code, text, found = cq.describe(bs, [("user", 2, None), ("user", 0, "x")])
    assert (code, found) == (INVALID_REQUEST, {}) and "Duplicate user" in str(text)
    code, text, _ = cq.describe(bs, [("group", 0, "x")])
    assert code == UNSUPPORTED_VERSION and "Custom entity type" in str(text)
    code, text, _ = cq.describe(bs, [("ip", 2, None), ("client-id", 2, None)])
    assert code == INVALID_REQUEST and "IP filter component" in str(text)
    assert cq.describe(bs, exact_user, version=0)[2].keys() == {anonymous, anonymous_a}

    assert cq.alter(bs, {"client-id": "a"}, remove=["producer_byte_rate"]) == (0, None)
    assert a not in cq.describe(bs)[2]

    # ip entities never mix with user/client-id ones in a filter
    assert cq.alter(bs, {"ip": "::ffff:10.0.0.1"}, {"connection_creation_rate": 500}) == (0, None)
    assert cq.alter(bs, {"ip": None}, {"connection_creation_rate": 1000}) == (0, None)
    ips = [("ip", cq.MATCH_SPECIFIED, None)]
    assert cq.describe(bs, ips)[2] == {
        (("ip", "10.0.0.1"),): {"connection_creation_rate": 500.0},
        (("ip", None),): {"connection_creation_rate": 1000.0},
    }
    assert (("ip", None),) not in cq.describe(bs, specified_user)[2]


def test_specific_entities_take_precedence_over_defaults(broker_factory: Factory) -> None:
    b = broker_factory(WINDOW)
    bs = b.bootstrap
    _topic(b, "prec")
    burst = 3 * RATE
    assert cq.alter(bs, {"client-id": None}, {"producer_byte_rate": RATE}) == (0, None)
    assert cq.produce_throttle_ms(b.host_port, "prec", "anyone", burst) > 0
    # users/ANONYMOUS/clients/vip outranks clients/<default>
    big = {"producer_byte_rate": 1e9}
    assert cq.alter(bs, {"user": "ANONYMOUS", "client-id": "vip"}, big) == (0, None)
    assert cq.produce_throttle_ms(b.host_port, "prec", "vip", burst) == 0
    assert cq.produce_throttle_ms(b.host_port, "prec", "vip", burst) == 0
    # users/<default> (a user level) outranks every client-id level
    assert cq.alter(bs, {"user": None}, big) == (0, None)
    assert cq.produce_throttle_ms(b.host_port, "prec", "someone", burst) == 0
    # clients/<id> is below users/<default>: setting it low changes nothing
    assert cq.alter(bs, {"client-id": "someone"}, {"producer_byte_rate": 100}) == (0, None)
    assert cq.produce_throttle_ms(b.host_port, "prec", "someone", burst) == 0
    # users/ANONYMOUS/clients/<default> outranks users/<default>
    assert cq.alter(bs, {"user": "ANONYMOUS", "client-id": None}, {"producer_byte_rate": RATE})
    assert cq.produce_throttle_ms(b.host_port, "prec", "someone-else", burst) > 0


def test_producer_is_held_to_its_byte_rate_and_each_record_is_delivered_once(
    broker_factory: Factory,
) -> None:
    b = broker_factory(WINDOW)
    _topic(b, "slowin")
    count, size = 64, 4096  # 4 RATE
    # a client without a quota first: it is never throttled
    free_s, free_throttles = _produce_all(b, "slowin", "free", count, size)
    assert free_throttles == [] and b.metric(THROTTLED) == 0
    assert cq.alter(b.bootstrap, {"client-id": "slow"}, {"producer_byte_rate": RATE}) == (0, None)
    elapsed, throttles = _produce_all(b, "slowin", "slow", count, size)
    assert elapsed >= count * size / RATE - 2, (elapsed, free_s)
    assert throttles and max(throttles) > 0
    assert b.metric(THROTTLED, quota="Produce") > 0
    assert b.metric("tierlog_client_quota_throttle_seconds_total", quota="Produce") > 0
    _, values, _ = _consume_all(b, "slowin", "reader", 2 * count)
    numbers = sorted(v[:8] for v in values)
    assert numbers == sorted([b"%08d" % i for i in range(count)] * 2)


def test_consumer_is_held_to_its_byte_rate_and_reads_each_record_once(
    broker_factory: Factory,
) -> None:
    b = broker_factory(WINDOW)
    _topic(b, "slowout")
    count, size = 64, 4096
    _produce_all(b, "slowout", "writer", count, size)
    free_s, free_values, free_throttles = _consume_all(b, "slowout", "free-reader", count)
    assert len(free_values) == count and free_throttles == []
    assert cq.alter(b.bootstrap, {"client-id": "sipper"}, {"consumer_byte_rate": RATE}) == (
        0,
        None,
    )
    elapsed, values, throttles = _consume_all(b, "slowout", "sipper", count, throttled=True)
    assert [v[:8] for v in values] == [b"%08d" % i for i in range(count)]
    assert elapsed >= count * size / RATE - 2, (elapsed, free_s)
    assert throttles and max(throttles) > 0
    assert b.metric(THROTTLED, quota="Fetch") > 0


def test_a_muted_connection_reads_nothing_and_is_not_idle(broker_factory: Factory) -> None:
    b = broker_factory({**WINDOW, "connections.max.idle.ms": "300"})
    _topic(b, "mute")
    rate = 10_000
    assert cq.alter(b.bootstrap, {"client-id": "muted"}, {"producer_byte_rate": rate}) == (0, None)
    sock = raw_connection(b.host_port)
    try:
        sock.sendall(produce_request("mute", 4 * rate, 1, "muted"))
        answered = time.monotonic()
        _, produced = decode_response(ApiKey.PRODUCE, 9, recv_frame(sock))
        throttle_s = produced.throttle_time.total_seconds()
        assert throttle_s >= 2.0  # (4 R - R) / R over a 1 s window
        api_versions = request_schema(ApiKey.API_VERSIONS, 0)
        assert api_versions is not None
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 2, "muted", mk(api_versions)))
        holds_for(
            lambda: time.monotonic() - answered > throttle_s - 0.3 or not _readable(sock),
            throttle_s - 0.5,
            "the muted connection answered before its throttle time or was closed",
        )
        corr, _ = decode_response(ApiKey.API_VERSIONS, 0, recv_frame(sock))
        assert corr == 2 and time.monotonic() - answered >= throttle_s - 0.3
    finally:
        sock.close()
    assert b.metric("tierlog_idle_connections_closed_total") == 0
    idle = raw_connection(b.host_port)
    assert wait_until(lambda: connection_closed(idle, 0.2), 10, what="an idle close")


def _readable(sock: socket.socket) -> bool:
    ready, _, _ = select.select([sock], [], [], 0)
    return bool(ready)


def test_quotas_survive_a_restart(broker_factory: Factory) -> None:
    b = broker_factory(WINDOW)
    _topic(b, "kept")
    assert cq.alter(b.bootstrap, {"user": "ANONYMOUS"}, {"producer_byte_rate": RATE}) == (0, None)
    assert cq.alter(b.bootstrap, {"client-id": None}, {"request_percentage": 80}) == (0, None)
    before = cq.describe(b.bootstrap)[2]
    b.restart(kill=True)
    assert cq.describe(b.bootstrap)[2] == before
    stored = json.loads((b.log_dir / "client-quotas.json").read_text())
    assert stored["entities"]["users/ANONYMOUS"] == {"producer_byte_rate": str(RATE)}
    assert cq.produce_throttle_ms(b.host_port, "kept", "after-restart", 3 * RATE) > 0


def test_request_percentage_throttles_by_time_on_the_loop(broker_factory: Factory) -> None:
    b = broker_factory(WINDOW)
    # 0.01 % of the loop: a tenth of a millisecond per second, less than one request takes
    assert cq.alter(b.bootstrap, {"client-id": "busy"}, {"request_percentage": 0.01}) == (
        0,
        None,
    )

    def metadata_throttles(client_id: str, requests: int) -> list[float]:
        seen: list[float] = []
        with WireConnection(*b.host_port, client_id=client_id) as conn:
            for _ in range(requests):
                r = conn.call(ApiKey.METADATA, 12, topics=None)
                seen.append(r.throttle_time.total_seconds())
        return seen

    assert metadata_throttles("idle", 5) == [0.0] * 5
    throttles = metadata_throttles("busy", 2)
    assert 0 < throttles[0] <= 1.0  # at most one window (quota.window.size.seconds)
    assert b.metric(THROTTLED, quota="Request") > 0


def test_connection_creation_rate_of_an_ip_holds_then_closes_extra_connections(
    broker_factory: Factory,
) -> None:
    b = broker_factory(WINDOW)
    assert cq.alter(b.bootstrap, {"ip": "127.0.0.1"}, {"connection_creation_rate": 2}) == (
        0,
        None,
    )
    api_versions = request_schema(ApiKey.API_VERSIONS, 0)
    assert api_versions is not None
    request = encode_request(ApiKey.API_VERSIONS, 0, 1, "burst", mk(api_versions))
    answered: list[bool] = []
    closed_after: list[float] = []
    socks = []
    started = time.monotonic()
    try:
        for _ in range(4):
            sock = raw_connection(b.host_port)
            socks.append(sock)
            sock.sendall(request)
        for sock in socks:
            sock.settimeout(5)
            try:
                answered.append(len(recv_frame(sock)) > 0)
            except (AssertionError, ConnectionError):
                answered.append(False)
                closed_after.append(time.monotonic() - started)
    finally:
        for sock in socks:
            sock.close()
    # two per second over a one-second window (the connection that set the quota came
    # before it): the first two are served, the rest held and closed
    assert answered[:2] == [True, True] and False in answered[2:]
    # (3 - 2) / 2 over a one-second window: held about half a second before the close
    assert min(closed_after) >= 0.3
    assert b.metric("tierlog_connections_refused_total", reason="connection_creation_rate") > 0


def test_a_throttled_consumer_with_a_fetch_session_misses_nothing(
    broker_factory: Factory,
) -> None:
    """kafka-python fetches through an incremental session (KIP-227): an empty throttled
    answer must leave the session as it was, or partitions whose records it dropped would
    never be sent again."""
    b = broker_factory(WINDOW)
    partitions, per_partition, size = 4, 16, 4096
    with WireConnection(*b.host_port) as conn:
        assert conn.create_topic("sessioned", partitions)[0] == 0
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    expected = []
    for part in range(partitions):
        for i in range(per_partition):
            value = b"%02d-%04d" % (part, i) + b"s" * (size - 7)
            expected.append(value)
            p.produce("sessioned", value=value, partition=part)
    assert p.flush(30) == 0
    assert cq.alter(b.bootstrap, {"client-id": "kp"}, {"consumer_byte_rate": RATE}) == (0, None)
    c = kafka.KafkaConsumer(
        bootstrap_servers=b.bootstrap,
        client_id="kp",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
    )
    got: list[bytes] = []
    started = time.monotonic()
    try:
        c.assign([kafka.TopicPartition("sessioned", part) for part in range(partitions)])

        def drained() -> bool:
            for msgs in c.poll(timeout_ms=200).values():
                got.extend(m.value for m in msgs)
            return len(got) >= len(expected)

        wait_until(drained, 60, what="every record")
    finally:
        c.close()
    elapsed = time.monotonic() - started
    assert sorted(got) == sorted(expected)
    assert elapsed >= len(expected) * size / RATE - 2
    assert b.metric(THROTTLED, quota="Fetch") > 0
    assert b.metric("tierlog_fetch_incremental_requests_total") > 0
