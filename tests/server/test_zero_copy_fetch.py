"""Hot Fetches answered from the log file with sendfile, against a real broker: a real
consumer gets every record, and a client that lets responses pile up gets them whole and in
order, still sent from the file (the broker waits for its socket instead of reading the
records into memory)."""

from __future__ import annotations

import socket
import time

import confluent_kafka as ck

from tests.helpers.broker import BrokerProcess
from tests.helpers.wire import fetch_fields, fetch_partition, offsets_and_values, recv_frame
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import decode_response, encode_request, request_schema

SENT = "tierlog_fetch_records_sendfile_bytes_total"
COPIED = "tierlog_fetch_records_copied_bytes_total"
VALUE = 1000


def _produce(b: BrokerProcess, topic: str, count: int) -> list[bytes]:
    with WireConnection(*b.host_port) as conn:
        assert conn.create_topic(topic, 1)[0] == 0
    values = [b"%06d" % i + bytes([65 + i % 26]) * (VALUE - 6) for i in range(count)]
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 65536})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0
    return values


def _log_bytes(b: BrokerProcess, topic: str) -> int:
    return sum(p.stat().st_size for p in b.log_dir.glob(f"{topic}-0/*.log"))


def test_a_consumer_gets_every_record_sent_from_the_log_file(broker: BrokerProcess) -> None:
    values = _produce(broker, "zc", 6000)
    consumer = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "zc",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["zc"])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                offset, value = msg.offset(), msg.value()
                assert offset is not None and value is not None
                got.append((offset, value))
    finally:
        consumer.close()
    assert got == list(enumerate(values))
    assert broker.metric(SENT) >= _log_bytes(broker, "zc")
    assert broker.metric(COPIED) == 0


def _fetch_frame(correlation_id: int, offset: int) -> bytes:
    fields = fetch_fields({"zc": [fetch_partition(0, offset, 256 << 10)]}, max_bytes=256 << 10)
    schema = request_schema(ApiKey.FETCH, 12)
    assert schema is not None
    body = mk(schema, **fields)
    return encode_request(ApiKey.FETCH, 12, correlation_id, "zc-test", body)


def _records(frame: bytes, correlation_id: int) -> bytes:
    corr, body = decode_response(ApiKey.FETCH, 12, frame)
    assert corr == correlation_id
    part = body.responses[0].partitions[0]
    assert int(part.error_code) == 0
    return bytes(part.records or b"")


def test_responses_a_slow_client_leaves_unread_arrive_whole_in_order_from_the_file(
    broker: BrokerProcess,
) -> None:
    values = _produce(broker, "zc", 4000)
    # 64 responses of 256 KiB: more than a socket's send buffer grows to (4 MiB here)
    offsets = [(i * 250) % 4000 for i in range(64)]
    before = broker.metric(SENT)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 10)  # fills at once
    sock.settimeout(30)
    sock.connect(broker.host_port)
    with sock:
        sock.sendall(b"".join(_fetch_frame(i, o) for i, o in enumerate(offsets)))
        answers = []
        for i in range(len(offsets)):
            answers.append(_records(recv_frame(sock), i))
    for offset, records in zip(offsets, answers, strict=True):
        got = offsets_and_values(records)
        assert got[0][0] <= offset < got[-1][0]
        assert got == [(o, values[o]) for o in range(got[0][0], got[-1][0] + 1)]
    assert broker.metric(SENT) - before >= sum(len(r) for r in answers)
    assert broker.metric(COPIED) == 0
